"""The JSONPath subset used by citations: what resolves, what is not found, what is malformed."""

from __future__ import annotations

import pytest

from diagnosis.jsonpath import NOT_FOUND, JsonPathError, parse, resolve

DOC = {
    "records": [{"message": "first"}, {"message": "second"}],
    "labels": {"__name__": "http_requests_total", "key with-dash": "v1"},
    "a": {"b": {"c": 3}},
    "x-request-id": "abc",
    "zero": 0,
    "nothing": None,
}


@pytest.mark.parametrize(("path", "expected"), [
    ("$", DOC),
    ("$.a.b", {"c": 3}),
    ("$.a.b.c", 3),
    ("$.records[0].message", "first"),
    ("$.records[1]", {"message": "second"}),
    ("$.records[-1].message", "second"),
    ('$.labels["key with-dash"]', "v1"),
    ("$.labels['key with-dash']", "v1"),
    ("$.labels.__name__", "http_requests_total"),
    ("$.x-request-id", "abc"),
    ('$["records"][ 0 ]["message"]', "first"),
    ("  $.zero ", 0),
])
def test_a_supported_path_resolves_to_its_value(path, expected):
    assert resolve(DOC, path) == expected


def test_a_null_value_is_found_and_is_not_the_sentinel():
    assert resolve(DOC, "$.nothing") is None


@pytest.mark.parametrize("path", [
    "$.missing", "$.records[2]", "$.records[-3]", "$.records.message", "$.a[0]", "$.labels[0]",
    "$.records[0].message[0]", "$.zero.x",
])
def test_a_path_that_names_nothing_returns_not_found(path):
    assert resolve(DOC, path) is NOT_FOUND
    assert resolve(DOC, path, default="fallback") == "fallback"


@pytest.mark.parametrize("path", [
    "", "records", "$.", "$..message", "$.*", "$[*]", "$.records[", "$.records[0", '$["x]', "$.0", "$.a b",
    "$[1:2]", "$.records[?(@.message)]", "$['a\\q']", "__import__('os').system('id')", "$" + ".a" * 200, "$[9999999999]",
])
def test_a_malformed_path_raises_jsonpath_error(path):
    with pytest.raises(JsonPathError):
        resolve(DOC, path)


def test_a_non_string_path_raises_jsonpath_error():
    with pytest.raises(JsonPathError):
        parse(["$"])  # type: ignore[arg-type]


def test_quoted_names_understand_escapes():
    assert parse(r'$["a\"b"]') == ('a"b',)
    assert parse(r"$['it\'s']") == ("it's",)
    assert parse(r'$["\u00e9t\u00e9"]') == ("été",)
