"""Secret masking (F-37) for tool results, model inputs and model outputs before they are stored or sent.

Stdlib only. Every secret is replaced by ``[REDACTED:<kind>]`` while the surrounding text (key
names, URL host, header scheme) is kept so that a redacted log line stays readable.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

REDACTION_PREFIX = "[REDACTED"

# Values that look like an assignment to a secret key but are not secrets: masking them would only
# add noise to the audit (``password: null``, ``token=[REDACTED:jwt]``).
_NON_SECRET_VALUES = frozenset({"", "null", "none", "nil", "true", "false", "undefined", "***", "****"})


def marker(kind: str) -> str:
    """The replacement text for a secret of ``kind``."""
    return f"[REDACTED:{kind}]"


Replace = Callable[[re.Match[str], str, list[int]], "str | None"]


@dataclass(frozen=True)
class _Rule:
    """One secret pattern. ``lowered`` rules run case-insensitively by matching a lowercase pattern
    against ``text.lower()`` (much faster in ``re`` than ``re.I``) and editing the original by span."""

    pattern: re.Pattern[str]
    replace: Replace
    lowered: bool = False


def _already_masked(value: str) -> bool:
    return value.startswith(REDACTION_PREFIX) or value.lower() in _NON_SECRET_VALUES


def _mask_whole(kind: str) -> Replace:
    def replace(m: re.Match[str], text: str, counter: list[int]) -> str | None:
        counter[0] += 1
        return marker(kind)

    return replace


def _mask_groups(kind: str, *groups: str) -> Replace:
    """Replace only the first of ``groups`` that matched, keeping the context around it."""

    def replace(m: re.Match[str], text: str, counter: list[int]) -> str | None:
        for group in groups:
            start, end = m.span(group)
            if start >= 0:
                break
        else:
            return None
        if _already_masked(text[start:end].strip()):
            return None
        counter[0] += 1
        return text[m.start() : start] + marker(kind) + text[end : m.end()]

    return replace


# The patterns put a literal first and check the left boundary with a lookbehind *after* it
# (``sk-(?<![\w-]sk-)``): ``re`` then scans for the literal at C speed instead of trying a
# lookbehind or a character class at every position of a 1 MB log.
def _literal_first(literal: str, boundary: str = r"A-Za-z0-9_-") -> str:
    return re.escape(literal) + rf"(?<![{boundary}]{re.escape(literal)})"


# Value of ``key=value``, ``key: value``, ``"key": "value"``, ``\"key\": \"value\"`` (JSON in a JSON string,
# at any depth).
_ASSIGNMENT_TAIL = (
    r"\\*[\"']?[ \t]*[:=][ \t]*(?:"
    # JSON-escaped once or more (a JSON string inside a JSON string inside a log line): \"v\", \\\"v\\\" ...
    r"\\+\"(?P<v_escaped>(?:[^\"\\\n]|\\+[^\"\\])*)\\+\""
    r"|\"(?P<v_double>(?:[^\"\\\n]|\\.)*)\""
    r"|'(?P<v_single>[^'\n]*)'"
    r"|\{(?P<v_braced>[^}\n]*)\}"  # ODBC: Pwd={a;b}
    r"|(?P<v_bare>[^\s\"'\\<>,;&}\])]+))"
)
_ASSIGNMENT_GROUPS = ("v_escaped", "v_double", "v_single", "v_braced", "v_bare")
# Key names, lowercase. No left word boundary on purpose (``DB_PASSWORD``, ``dbPassword``,
# ``x-api-key`` all match); the separator bounds the right side, so ``max_tokens=512`` and
# ``password_hash=`` do not. A bare ``key`` only counts after api/access/private/... .
_ASSIGNMENT_KEYS = (
    r"pass(?:word|wd|phrase)",
    r"pwd",  # ODBC / ADO.NET connection strings: Server=...;Uid=sa;Pwd=...;
    r"secret",
    r"token",
    r"key(?:" + "|".join(
        f"(?<={prefix}{sep}key)"
        for prefix in ("api", "access", "secret", "private", "account", "signing", "encryption", "master")
        for sep in ("", "_", "-")
    ) + ")",
    r"signature",
    r"credentials?",
)

_RULES: tuple[_Rule, ...] = (
    # PEM private keys first: the body is multi-line and must go as one block. A block cut off by
    # truncation has no END line: the fallback then takes the base64 lines that follow (separated by
    # real or JSON-escaped newlines), stopping at the first line that is not base64.
    _Rule(
        re.compile(
            r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----"
            r"(?:.*?-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----"
            r"|(?:(?:\s|\\[nr])+[A-Za-z0-9+/=]{8,}(?![A-Za-z0-9+/=_.:-]))*)",
            re.S,
        ),
        _mask_whole("private_key"),
    ),
    # scheme://user:password@host -> scheme://user:[REDACTED:url_password]@host (Redis URLs have no user).
    _Rule(
        re.compile(r"://[^\s:/?#@\[\]'\"<>]*:(?P<secret>[^\s/?#@'\"<>]+)@"),
        _mask_groups("url_password", "secret"),
    ),
    # Authorization headers: keep the scheme word (Bearer, Basic, ...) so the line stays readable.
    _Rule(
        re.compile(
            _literal_first("authorization", "a-z0-9")
            + r"\\?[\"']?[ \t]*[:=][ \t]*\\?[\"']?"
            r"(?:(?:bearer|basic|token|digest|negotiate|apikey|sso-key|aws4-hmac-sha256)[ \t]+)?"
            r"(?P<secret>[^\s\"'\\,;]+)"
        ),
        _mask_groups("authorization", "secret"),
        lowered=True,
    ),
    # A bare "Bearer <token>"; the token must hold a digit so that "bearer of bad news" survives.
    _Rule(
        re.compile(
            _literal_first("bearer", "a-z0-9")
            + r"[ \t]+(?P<secret>(?=[a-z0-9\-._~+/]*\d)[a-z0-9\-._~+/]{8,}=*)(?![a-z0-9=])"
        ),
        _mask_groups("bearer_token", "secret"),
        lowered=True,
    ),
    _Rule(
        re.compile(_literal_first("eyJ") + r"[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
        _mask_whole("jwt"),
    ),
    _Rule(re.compile(_literal_first("sk-") + r"[A-Za-z0-9_-]{20,}"), _mask_whole("openai_key")),
    _Rule(re.compile(_literal_first("sk_") + r"(?:live|test)_[A-Za-z0-9]{16,}"), _mask_whole("stripe_key")),
    _Rule(re.compile(_literal_first("rk_") + r"(?:live|test)_[A-Za-z0-9]{16,}"), _mask_whole("stripe_key")),
    _Rule(
        re.compile(
            r"A(?<![A-Za-z0-9]A)(?:KIA|SIA|BIA|CCA|GPA|IDA|IPA|NPA|NVA|ROA|PKA)[A-Z0-9]{16}(?![A-Za-z0-9])"
        ),
        _mask_whole("aws_access_key"),
    ),
    _Rule(re.compile(_literal_first("AIza") + r"[0-9A-Za-z_-]{30,}"), _mask_whole("google_api_key")),
    _Rule(re.compile(_literal_first("gh") + r"[pousr]_[A-Za-z0-9]{36,255}"), _mask_whole("github_token")),
    _Rule(re.compile(_literal_first("github_pat_") + r"[A-Za-z0-9_]{22,255}"), _mask_whole("github_token")),
    _Rule(re.compile(_literal_first("glpat-") + r"[A-Za-z0-9_-]{20,}"), _mask_whole("gitlab_token")),
    _Rule(re.compile(_literal_first("xox") + r"[abposr]-[A-Za-z0-9-]{10,}"), _mask_whole("slack_token")),
    _Rule(re.compile(_literal_first("hf_") + r"[A-Za-z0-9]{30,}"), _mask_whole("huggingface_token")),
    _Rule(
        re.compile(r"hooks\.slack\.com/services/(?P<secret>[A-Za-z0-9/_-]+)"),
        _mask_groups("slack_webhook", "secret"),
    ),
    # key=value pairs last, so that a value already masked as a specific kind keeps that kind.
    *(
        _Rule(re.compile(key + _ASSIGNMENT_TAIL), _mask_groups("secret", *_ASSIGNMENT_GROUPS), lowered=True)
        for key in _ASSIGNMENT_KEYS
    ),
)


# Lowercase literals of which every rule match contains at least one. For a short string (most
# JSON values) one search for them is cheaper than running each rule; for a long text the
# literal-first rules themselves are faster than this alternation.
_TRIGGERS = re.compile(
    "|".join(
        re.escape(t)
        for t in (
            "private key", "://", "authorization", "bearer", "eyj", "sk-", "sk_", "rk_", "akia", "asia", "abia",
            "acca", "agpa", "aida", "aipa", "anpa", "anva", "aroa", "apka", "aiza", "ghp_", "gho_", "ghu_", "ghs_",
            "ghr_", "github_pat_", "glpat-", "xox", "hf_", "hooks.slack.com", "pass", "pwd", "secret", "token", "key",
            "signature", "credential",
        )
    )
)
_SHORT_TEXT = 4096


def _lower_same_length(text: str) -> str:
    """``text.lower()`` when it keeps every index (always for ASCII); else lowercase ASCII only."""
    lowered = text.lower()
    if text.isascii() or len(lowered) == len(text):
        return lowered
    return text.translate(_ASCII_LOWER)


_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}


# Texts in which the rules found nothing. A run redacts the same strings over and over (tool names,
# services, the prompts and tool results a tool loop resends with every model call): a lookup here skips
# the rules for them. A text with a secret is never kept, and a text is only ever compared whole, so the
# cache can only answer "nothing to mask" for a text the rules themselves gave back unchanged. Bounded in
# entries and in characters (a long text counts its length); emptied when either bound would be passed.
_CLEAN_TEXTS: dict[str, None] = {}
_CLEAN_TEXTS_MAX = 2048
_CLEAN_TEXT_CHARS_MAX = 4_000_000  # all entries together (the short ones alone could reach 8 M before)
_CLEAN_TEXT_LONGEST = 262_144  # a longer text (a whole raw tool result) is rarely seen twice: not kept
_clean_chars = [0]


def _remember_clean(text: str) -> None:
    size = len(text)
    if size > min(_CLEAN_TEXT_LONGEST, _CLEAN_TEXT_CHARS_MAX):
        return
    if len(_CLEAN_TEXTS) >= _CLEAN_TEXTS_MAX or _clean_chars[0] + size > _CLEAN_TEXT_CHARS_MAX:
        _CLEAN_TEXTS.clear()
        _clean_chars[0] = 0
    _CLEAN_TEXTS[text] = None
    _clean_chars[0] += size


def redact_text_counted(text: str) -> tuple[str, int]:
    """Mask every secret in ``text``; return the masked text and the number of secrets masked."""
    if not isinstance(text, str):
        raise TypeError(f"redact_text expects str, got {type(text).__name__}")
    exact = type(text) is str  # a subclass may compare equal to a clean text it is not
    if exact and text in _CLEAN_TEXTS:
        return text, 0
    masked, count = _apply_rules(text)
    if exact and not count and masked is text:
        _remember_clean(text)
    return masked, count


def _apply_rules(text: str) -> tuple[str, int]:
    """Every rule over ``text`` (the redactor itself, without the cache of clean texts)."""
    if not text:
        return text, 0
    counter = [0]
    lowered: str | None = None
    if len(text) <= _SHORT_TEXT:
        lowered = _lower_same_length(text)
        if _TRIGGERS.search(lowered) is None:
            return text, 0
    for rule in _RULES:
        if rule.lowered:
            if lowered is None:
                lowered = _lower_same_length(text)
            haystack = lowered
        else:
            haystack = text
        pieces: list[str] = []
        last = 0
        for m in rule.pattern.finditer(haystack):
            replacement = rule.replace(m, text, counter)
            if replacement is None:
                continue
            pieces.append(text[last : m.start()])
            pieces.append(replacement)
            last = m.end()
        if pieces:
            pieces.append(text[last:])
            text = "".join(pieces)
            lowered = None
    return text, counter[0]


def redact_text(text: str) -> str:
    """Mask every secret in ``text`` (see module docstring)."""
    return redact_text_counted(text)[0]


_KEY_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_SECRET_LAST_WORDS = frozenset(
    {"password", "passwd", "passphrase", "secret", "token", "authorization", "credential", "credentials",
     "apikey", "cookie", "signature", "pwd"}
)
_SECRET_LAST_PAIRS = frozenset(
    {"apikey", "accesskey", "secretkey", "privatekey", "accountkey", "clientsecret", "sessionkey", "authkey",
     "signingkey", "encryptionkey", "masterkey"}
)


@lru_cache(maxsize=4096)
def is_secret_key(key: str) -> bool:
    """True when a mapping key names a secret (``password``, ``apiKey``, ``X-Api-Key``, ``AWS_SECRET_ACCESS_KEY``).

    Only the last word counts, so ``max_tokens``, ``token_type`` and ``secret_name`` are not secrets.
    """
    words = [w.lower() for w in _KEY_WORDS.findall(key)]
    if not words:
        return False
    if words[-1] in _SECRET_LAST_WORDS:
        return True
    return len(words) >= 2 and words[-2] + words[-1] in _SECRET_LAST_PAIRS


def _mask_all(value: Any, counter: list[int]) -> Any:
    """Everything under a secret key: mask each string and number leaf, keep the structure."""
    if isinstance(value, str):
        if value == "" or value.startswith(REDACTION_PREFIX):
            return value
        counter[0] += 1
        return marker("secret")
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        counter[0] += 1
        return marker("secret")
    if isinstance(value, Mapping):
        return {k: _mask_all(v, counter) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask_all(v, counter) for v in value]
    if isinstance(value, tuple):
        return tuple(_mask_all(v, counter) for v in value)
    return value


# Leaves with nothing to mask, by exact type (a subclass goes the long way, through the ABC checks).
_PLAIN_LEAVES = frozenset({int, float, bool, type(None)})


def _redact(value: Any, counter: list[int]) -> Any:
    kind = type(value)
    if kind in _PLAIN_LEAVES or (kind is str and value in _CLEAN_TEXTS):
        return value
    if isinstance(value, str):
        masked, n = redact_text_counted(value)
        counter[0] += n
        return masked
    if kind is list:  # before the Mapping test, whose ABC check costs more than the exact type's
        return [_redact(v, counter) for v in value]
    if kind is dict or isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if isinstance(k, str) and is_secret_key(k):
                out[k] = _mask_all(v, counter)
            else:
                out[k] = _redact(v, counter)
        return out
    if isinstance(value, list):
        return [_redact(v, counter) for v in value]
    if isinstance(value, tuple):
        return tuple(_redact(v, counter) for v in value)
    return value


def redact_value_counted(obj: Any) -> tuple[Any, int]:
    """Return a redacted deep copy of a JSON-like value and the number of secrets masked.

    Strings are redacted with ``redact_text``; under a key that names a secret every string or
    number is masked entirely. Keys themselves are kept; other scalars are returned unchanged.
    """
    counter = [0]
    return _redact(obj, counter), counter[0]


def redact_value(obj: Any) -> Any:
    """Return a redacted deep copy of a JSON-like value (dicts, lists, tuples, strings)."""
    return redact_value_counted(obj)[0]
