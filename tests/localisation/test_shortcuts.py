"""The localiser's shortcuts give what the long way gives: masking and durations per digit shape, the
change point from one pass over the gains, and series skipped because they cannot move far enough."""

import math
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from diagnosis.localisation.deviation import best_split, shift
from diagnosis.localisation.signals import MIN_RELATIVE, _DURATION, _duration_ms, _within_relative
from diagnosis.localisation.records import Ref, ref_of
from diagnosis.localisation.templates import _ZEROED, Masker, masked, zeroed

LINES = [
    "2026-12-03T12:47:48.010Z  INFO 1 --- [shop] [nio-8080-exec-31] c.s.RequestService : request 45872 in 4ms",
    "GET /v1/items/83737 200 in 34 ms",
    "GET /v2/items/5 200 in 340 ms",
    '{"level":40,"time":1796300265626,"msg":"(node:1) [DEP0005] DeprecationWarning: Buffer() is deprecated"}',
    '10.0.8.223 - - [03/Dec/2026:13:00:02 +0000] "GET /v1/batches HTTP/1.1" 504 6734 rt=0.009 urt="0.009"',
    "dial tcp 10.2.1.22:5432: connect: connection refused (after 3000ms) id 3f2a9c1e-0b4d-4e8f-9a7b-1c2d3e4f5a6b",
    "1:M 03 Dec 2026 12:13:25.579 * 673 changes in 300 seconds. Saving...",
    "E1203 12:00:01.123456 1 reflector.go:138] failed to list v1.Pod: deadbeef12 µs 12µs 1.5s",
    "worker w0rk3r-07 finished job 0 in 0.0 s\n  at frame 12",
]
TEXT = st.text(alphabet="0123456789abcdefAZIWv :./-_<>=\"%µsmhKMGiB\n١٢", max_size=60)


def _direct_duration(message):
    match = _DURATION.search(message)
    if not match:
        return None
    value, unit = float(match.group(1)), match.group(2).lower()
    return value * {"s": 1000, "sec": 1000, "seconds": 1000, "µs": 0.001, "us": 0.001}.get(unit, 1)


def test_each_line_is_masked_as_it_would_be_alone_however_often_its_digit_shape_comes_back():
    masker = Masker()
    variants = [line for line in LINES for line in (line, re.sub(r"\d", lambda m: str(9 - int(m[0])), line))]
    for _ in range(3):  # first sight, the plan on the second, the plan reused after it
        for line in variants:
            text, same = masker(line)
            assert text == masked(line)
            assert not same or not re.search(r"[0-9]", text)
    assert masker("GET /v1/items/1 200 in 2 ms")[0] == "GET /v1/items/<NUM> <NUM> in <NUM> ms"


@settings(max_examples=300, deadline=None)
@given(st.lists(TEXT, min_size=1, max_size=8))
def test_masking_by_digit_shape_matches_masking_each_line(lines):
    masker = Masker()
    for line in lines + lines:
        assert masker(line)[0] == masked(line)


@settings(max_examples=300, deadline=None)
@given(st.lists(TEXT, min_size=1, max_size=8))
def test_durations_found_by_digit_shape_match_a_search_of_each_line(lines):
    spans = {}
    for line in lines + LINES + lines:
        assert _duration_ms(line, spans) == _direct_duration(line)


def _split_by_loop(values):
    prefix, best, best_gain = [0.0], None, -1.0
    for v in values:
        prefix.append(prefix[-1] + v)
    n, total = len(values), prefix[-1]
    for k in range(8, n - 3 + 1):
        gain = k * (n - k) / n * ((total - prefix[k]) / (n - k) - prefix[k] / k) ** 2
        if gain > best_gain:
            best, best_gain = k, gain
    return best


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(min_value=-1e6, max_value=1e6) | st.sampled_from([0.0, 1.0, 2.0]), min_size=11,
                max_size=90))
def test_the_change_point_is_the_first_largest_gain(values):
    assert best_split(values) == _split_by_loop(values)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(min_value=-1e9, max_value=1e9, allow_subnormal=False), min_size=11, max_size=60))
def test_a_series_skipped_as_too_close_to_itself_has_no_shift_that_counts(values):
    if _within_relative(values):
        moved = shift([float(i) for i in range(len(values))], values)
        assert moved is None or moved.relative < MIN_RELATIVE


def test_a_series_that_moves_a_fifth_is_not_skipped():
    assert _within_relative([100.0] * 40 + [104.0] * 20)
    assert not _within_relative([100.0] * 40 + [125.0] * 20)
    assert not _within_relative([-1.0] * 40 + [1.0] * 20)
    assert not _within_relative([100.0] * 40 + [math.inf] * 20)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40) | TEXT)
def test_the_digit_shape_of_a_line_is_its_translation_whatever_its_characters(text):
    assert zeroed(text) == text.translate(_ZEROED)


def test_a_reference_made_the_quick_way_is_the_reference_made_the_long_way():
    quick, slow = ref_of("inv-1", "query_logs", "$.records[0].message", "x"), Ref("inv-1", "query_logs", "$.records[0].message", "x")
    assert (quick, hash(quick), repr(quick)) == (slow, hash(slow), repr(slow))


def test_values_whose_sum_overflows_are_read_and_infinite_ones_are_left_out():
    from diagnosis.localisation.records import read_evidence

    def read(values):
        result = {"series": [{"labels": {"__name__": "m", "service": "a"},
                              "values": [[60.0 * i, v] for i, v in enumerate(values)]}]}
        return read_evidence([{"invocation_id": "inv-1", "tool_name": "query_metrics", "result": result}]).series[0].values

    assert read(["1e308", "1e308", "2"]) == [1e308, 1e308, 2.0]
    assert read(["1", "inf", "2", "nan"]) == [1.0, 2.0]
