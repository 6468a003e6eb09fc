"""HTML for the console: answers and reports as sanitised Markdown, stored JSON pretty-printed with the
excerpts the Gatekeeper verified marked (<mark>) at the very path they were cited from.

One renderer for every Markdown surface of the console (the answer, the alert report, its table):
CommonMark with the GitHub tables and strikethrough (markdown-it-py), **raw HTML off** (an HTML tag in
the text is shown as text), no links made from bare URLs, and a link or an image becomes active only
when its target is https (or http) on a host of ``MARKDOWN_LINK_HOSTS``; any other is shown as its
text followed by the target in a code span. Images are never embedded: an allowed one is a link.
nh3 then keeps only the tags, attributes and URL schemes below, as a second line of defence.
The served Markdown itself is written inert (diagnosis/markdown_text.py); API clients that render
`answer` should still use the same rules (docs/CONSOLE.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import nh3
from django.conf import settings
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt
from markdown_it.token import Token

from diagnosis.contracts import BRACKETED_CITATION_RE
from diagnosis.gatekeeper import normalise_whitespace
from diagnosis.jsonpath import JsonPathError, parse

ALLOWED_TAGS = {
    "a", "abbr", "b", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i",
    "li", "ol", "p", "pre", "s", "strong", "sub", "sup", "table", "tbody", "td", "th", "thead", "tr", "ul",
}
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "abbr": {"title"}, "td": {"style"}, "th": {"style"}, "ol": {"start"}}
LINK_SCHEMES = ("https", "http")
ALIGN_STYLE = re.compile(r'^text-align:(left|right|center)$')
CITATION = BRACKETED_CITATION_RE
JSON_RENDER_LIMIT = 150_000  # characters of pretty JSON per value; the JSON trace API has the rest
INLINE_LIMIT = 6_000  # past this a result is shown as windows around its verified excerpts
FULL_LIMIT = 2_000_000  # characters of a whole result loaded on demand ("show all")
WINDOW_ITEMS = 3  # list items kept either side of a cited one (and at the head of an uncited list)
WINDOW_LIST_MIN = 12  # shorter lists are shown whole
WINDOW_CHARS = 400  # characters kept either side of a match in a long string
WINDOW_STRING_MIN = 2_000  # shorter strings are shown whole
CONTEXT_CHARS = 240  # characters kept either side of a highlighted excerpt in the audit


def link_allowed(url: str) -> bool:
    """An http(s) URL on a host the deployment allows (MARKDOWN_LINK_HOSTS); anything else stays text."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return False
    hosts = {h.lower() for h in getattr(settings, "MARKDOWN_LINK_HOSTS", ())}
    return parts.scheme.lower() in LINK_SCHEMES and bool(parts.hostname) and parts.hostname.lower() in hosts \
        and not parts.username and not parts.password


def _text_token(content: str) -> Token:
    token = Token("text", "", 0)
    token.content = content
    return token


def _code_token(content: str) -> Token:
    token = Token("code_inline", "code", 0)
    token.content = content
    token.markup = "`"
    return token


def _inert_links(state) -> None:
    """Links and images whose target is not allowed become their text plus the target as code; an
    allowed image becomes a link to it (never an embedded image)."""
    for block in state.tokens:
        if block.type != "inline" or not block.children:
            continue
        out: list[Token] = []
        pending: list[str | None] = []  # per open link: the target to append at its close, or None
        for token in block.children:
            if token.type == "link_open":
                href = str(token.attrGet("href") or "")
                if link_allowed(href):
                    pending.append(None)
                    out.append(token)
                else:
                    pending.append(href)
            elif token.type == "link_close":
                href = pending.pop() if pending else None
                if href is None:
                    out.append(token)
                else:
                    out += [_text_token(" ("), _code_token(href), _text_token(")")]
            elif token.type == "image":
                src = str(token.attrGet("src") or "")
                alt = "".join(child.content for child in token.children or ()) or token.content
                if link_allowed(src):
                    link = Token("link_open", "a", 1)
                    link.attrSet("href", src)
                    out += [link, _text_token(alt or src), Token("link_close", "a", -1)]
                else:
                    out += [_text_token(f"{alt} (" if alt else "("), _code_token(src), _text_token(")")]
            else:
                out.append(token)
        block.children = out


# CommonMark + GFM tables and strikethrough; raw HTML off, no linkify, links and images by the rule above.
MARKDOWN = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable(
    ["table", "strikethrough"])
MARKDOWN.core.ruler.push("inert_links", _inert_links)


def markdown_html(text: str, *, citations: Iterable[str] = ()) -> SafeString:
    """`text` as Markdown, sanitised (see the module docstring); `[inv-…]` citations of this run link to
    their invocation."""
    html = nh3.clean(
        MARKDOWN.render(text or ""),
        tags=ALLOWED_TAGS, attributes=ALLOWED_ATTRIBUTES, url_schemes=set(LINK_SCHEMES),
        link_rel="noopener noreferrer nofollow", attribute_filter=_attribute_filter,
    )
    known = set(citations)
    # Safe after sanitising: the pattern admits only an invocation id, and only ids of this run link.
    html = CITATION.sub(
        lambda m: f'<a class="citation" href="#{m[1]}">[{m[1]}]</a>' if m[1] in known else m[0], html
    )
    return mark_safe(html)


def _attribute_filter(tag: str, name: str, value: str) -> str | None:
    """Table cells keep only their column alignment as a style."""
    if name == "style":
        return value if ALIGN_STYLE.match(value.replace(" ", "")) else None
    return value


def excerpt_pattern(excerpt: Any) -> re.Pattern[str] | None:
    """The excerpt as a regex whose spaces match any whitespace run, as the Gatekeeper compares it."""
    if not isinstance(excerpt, str):
        return None
    needle = normalise_whitespace(excerpt)
    if not needle:
        return None
    return re.compile(r"\s+".join(re.escape(token) for token in needle.split(" ")))


@dataclass(frozen=True)
class Highlight:
    """A verified excerpt to mark at `segments` (a parsed raw_path) of one stored value."""

    segments: tuple
    pattern: re.Pattern[str]
    label: str = ""
    css: str = "evidence"  # "evidence": a verified excerpt; HINT_CSS: a record the localiser's ranking points at


HINT_CSS = "rc-hint"
WHOLE_VALUE = re.compile(r"\S(?:[\s\S]*\S)?")


def record_highlight(raw_path: Any, label: str) -> Highlight | None:
    """The whole value at `raw_path`, marked as a hint (not a verified excerpt): where the ranking points."""
    if not isinstance(raw_path, str):
        return None
    try:
        segments = parse(raw_path)
    except JsonPathError:
        return None
    return Highlight(segments, WHOLE_VALUE, label, HINT_CSS)


def highlight_for(raw_path: Any, excerpt: Any, label: str = "") -> Highlight | None:
    if not isinstance(raw_path, str):
        return None
    pattern = excerpt_pattern(excerpt)
    try:
        segments = parse(raw_path)
    except JsonPathError:
        return None
    return Highlight(segments, pattern, label) if pattern else None


def _json_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)[1:-1]


def marked_text(
    text: str, patterns: Sequence[re.Pattern[str]], *, quoted: bool = True, titles: Sequence[str] = (),
    encode=None, classes: Sequence[str] = (),
) -> str:
    """`text` HTML-escaped (as a JSON string when `quoted`) with every match of `patterns` in <mark>
    (of class `classes[i]`, "evidence" by default); a verified excerpt wins over a hint it overlaps."""
    spans: list[tuple[int, int, str, str]] = []
    for index, pattern in enumerate(patterns):
        css = classes[index] if index < len(classes) else "evidence"
        for match in pattern.finditer(text):
            if match.end() > match.start():
                spans.append((match.start(), match.end(), titles[index] if index < len(titles) else "", css))
    chosen: list[tuple[int, int, str, str]] = []
    for span in sorted(spans, key=lambda s: (s[3] != "evidence", s)):
        if all(span[1] <= c[0] or span[0] >= c[1] for c in chosen):
            chosen.append(span)
    encode = encode or (_json_string if quoted else (lambda s: s))
    out, cursor = [], 0
    for start, end, title, css in sorted(chosen):
        out.append(escape(encode(text[cursor:start])))
        attr = f' title="{escape(title)}"' if title else ""
        out.append(f'<mark class="{css}"{attr}>{escape(encode(text[start:end]))}</mark>')
        cursor = end
    out.append(escape(encode(text[cursor:])))
    body = "".join(out)
    return f'<span class="j-str">"{body}"</span>' if quoted else body


class _Budget(Exception):
    pass


class _JsonWriter:
    """A json.dumps(indent=2) look-alike that writes escaped HTML and marks highlighted values."""

    def __init__(self, highlights: Sequence[Highlight], limit: int, window: bool = False):
        self.highlights = list(highlights)
        self.limit = limit
        self.window = window
        self.size = 0
        self.out: list[str] = []

    def gap(self, text: str) -> None:
        self.emit(f'<span class="j-gap">… {escape(text)} …</span>', len(text) + 4)

    def kept_indices(self, path: tuple, length: int) -> list[int]:
        """In window mode: the items of a long list to show, around each cited index."""
        depth = len(path)
        cited = set()
        for h in self.highlights:
            if len(h.segments) > depth and h.segments[:depth] == path and isinstance(h.segments[depth], int):
                index = h.segments[depth]
                cited.add(index if index >= 0 else length + index)
            elif len(h.segments) <= depth and path[: len(h.segments)] == h.segments:
                return list(range(length))  # the whole list is cited: unusual, show it all
        if not cited:
            return list(range(min(WINDOW_ITEMS, length)))
        keep = set()
        for index in cited:
            keep.update(range(max(0, index - WINDOW_ITEMS), min(length, index + WINDOW_ITEMS + 1)))
        return sorted(keep)

    def write_string_window(self, value: str, active: list[Highlight]) -> None:
        spans = []
        for h in active:
            spans += [(m.start(), m.end()) for m in h.pattern.finditer(value) if m.end() > m.start()]
        if not spans:
            spans = [(0, 0)]
        windows: list[list[int]] = []
        for start, end in sorted(spans):
            lo, hi = max(0, start - WINDOW_CHARS), min(len(value), end + WINDOW_CHARS)
            if windows and lo <= windows[-1][1]:
                windows[-1][1] = max(windows[-1][1], hi)
            else:
                windows.append([lo, hi])
        patterns, titles = [h.pattern for h in active], [h.label for h in active]
        self.emit('<span class="j-str">"', 1)
        cursor = 0
        for lo, hi in windows:
            if lo > cursor:
                self.gap(f"{lo - cursor:,} characters not shown")
            self.emit(marked_text(value[lo:hi], patterns, quoted=False, titles=titles, encode=_json_string,
                                  classes=[h.css for h in active]), hi - lo)
            cursor = hi
        if cursor < len(value):
            self.gap(f"{len(value) - cursor:,} characters not shown")
        self.emit('"</span>', 1)

    def emit(self, html: str, visible: int) -> None:
        self.size += visible
        self.out.append(html)
        if self.size > self.limit:
            raise _Budget

    def active(self, path: tuple) -> list[Highlight]:
        return [h for h in self.highlights if len(h.segments) <= len(path) and path[: len(h.segments)] == h.segments]

    def write(self, value: Any, path: tuple, indent: int) -> None:
        if isinstance(value, Mapping):
            self.write_object(value, path, indent)
        elif isinstance(value, (list, tuple)):
            self.write_list(value, path, indent)
        elif isinstance(value, str):
            active = self.active(path)
            if self.window and len(value) >= WINDOW_STRING_MIN:
                self.write_string_window(value, active)
                return
            self.emit(marked_text(value, [h.pattern for h in active], titles=[h.label for h in active],
                                  classes=[h.css for h in active]), len(value) + 2)
        else:
            text = json.dumps(value)
            css = "j-num" if isinstance(value, (int, float)) and not isinstance(value, bool) else "j-lit"
            html = f'<span class="{css}">{escape(text)}</span>'
            found = sorted((h for h in self.active(path) if h.pattern.search(text)), key=lambda h: h.css != "evidence")
            if found:
                attr = f' title="{escape(found[0].label)}"' if found[0].css != "evidence" and found[0].label else ""
                html = f'<mark class="{found[0].css}"{attr}>{html}</mark>'
            self.emit(html, len(text))

    def write_object(self, value: Mapping, path: tuple, indent: int) -> None:
        pad = "  " * indent
        if not value:
            return self.emit("{}", 2)
        self.emit("{\n", 2)
        items = list(value.items())
        for i, (key, item) in enumerate(items):
            self.emit(f'{pad}  <span class="j-key">{escape(json.dumps(str(key), ensure_ascii=False))}</span>: ',
                      len(pad) + len(str(key)) + 6)
            self.write(item, path + (str(key),), indent + 1)
            self.emit(",\n" if i < len(items) - 1 else "\n", 2)
        self.emit(f"{pad}}}", len(pad) + 1)

    def write_list(self, value: list | tuple, path: tuple, indent: int) -> None:
        pad = "  " * indent
        if not value:
            return self.emit("[]", 2)
        if self._inline(value):  # [1764410400, "7"] on one line, as a reader writes a sample
            self.emit("[", 1)
            for i, item in enumerate(value):
                self.write(item, self._index_path(path, i, len(value)), indent + 1)
                if i < len(value) - 1:
                    self.emit(", ", 2)
            self.emit("]", 1)
            return
        self.emit("[\n", 2)
        indices = self.kept_indices(path, len(value)) if self.window and len(value) >= WINDOW_LIST_MIN else range(len(value))
        previous = -1
        for i in indices:
            if i > previous + 1:
                self.emit(f"{pad}  ", len(pad) + 2)
                self.gap(f"{i - previous - 1:,} item{'s' if i - previous - 1 > 1 else ''} not shown")
                self.emit("\n", 1)
            self.emit(f"{pad}  ", len(pad) + 2)
            # A negative index in a cited path names the same element as its positive twin.
            self.write(value[i], self._index_path(path, i, len(value)), indent + 1)
            self.emit(",\n" if i < len(value) - 1 else "\n", 2)
            previous = i
        if previous < len(value) - 1:
            self.emit(f"{pad}  ", len(pad) + 2)
            self.gap(f"{len(value) - previous - 1:,} more item{'s' if len(value) - previous - 1 > 1 else ''} not shown")
            self.emit("\n", 1)
        self.emit(f"{pad}]", len(pad) + 1)

    @staticmethod
    def _inline(items) -> bool:
        scalars = all(
            item is None or isinstance(item, (bool, int, float)) or (isinstance(item, str) and len(item) <= 24)
            for item in items
        )
        return scalars and len(items) <= 6 and sum(len(str(item)) + 4 for item in items) <= 64

    def _index_path(self, path: tuple, index: int, length: int) -> tuple:
        for highlight in self.highlights:
            depth = len(path)
            if (len(highlight.segments) > depth and highlight.segments[:depth] == path
                    and isinstance(highlight.segments[depth], int) and highlight.segments[depth] == index - length):
                return path + (index - length,)
        return path + (index,)


def parsed_json(value: Any) -> Any:
    """A string that holds a JSON object or list, parsed; any other value as it is."""
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if isinstance(parsed, (dict, list)):
            return parsed
    return value


def json_html(value: Any, highlights: Sequence[Highlight] = (), *, limit: int = JSON_RENDER_LIMIT,
              window: bool = False) -> SafeString:
    """Pretty-printed, escaped JSON of `value` with each highlight's excerpt marked where it was cited.

    With `window`, long lists keep only the items around each cited index and long strings only the
    characters around each match, with a marker for what was left out.
    """
    writer = _JsonWriter(highlights, limit, window)
    try:
        writer.write(parsed_json(value), (), 0)
    except _Budget:
        writer.out.append('\n<span class="j-cut">… cut here in the console; the JSON trace has the full value</span>')
    return mark_safe("".join(writer.out))


@dataclass(frozen=True)
class ResultView:
    html: SafeString
    windowed: bool  # only windows around the verified excerpts are shown; "show all" loads the rest


def result_html(value: Any, highlights: Sequence[Highlight] = (), *, inline_limit: int = INLINE_LIMIT) -> ResultView:
    """A tool result for the run page: whole when it is small, else a window around each verified
    excerpt, so every highlighted excerpt is on the page however large the result is."""
    value = parsed_json(value)
    writer = _JsonWriter(highlights, inline_limit)
    try:
        writer.write(value, (), 0)
        return ResultView(mark_safe("".join(writer.out)), False)
    except _Budget:
        return ResultView(json_html(value, highlights, window=True), True)


def excerpt_in_context(value: Any, excerpt: Any) -> SafeString | None:
    """The cited value around the excerpt with the excerpt marked; None when it cannot be found."""
    pattern = excerpt_pattern(excerpt)
    if pattern is None:
        return None
    candidates = [value] if isinstance(value, str) else list(_string_leaves(value))
    for text in candidates:
        match = pattern.search(text)
        if match:
            start, end = max(0, match.start() - CONTEXT_CHARS), min(len(text), match.end() + CONTEXT_CHARS)
            return format_html(
                '{}{}<mark class="evidence">{}</mark>{}{}',
                "…" if start else "", text[start:match.start()], text[match.start():match.end()],
                text[match.end():end], "…" if end < len(text) else "",
            )
    if not isinstance(value, str):
        # The Gatekeeper also accepts an excerpt of the value's JSON text: mark the whole value.
        text = json.dumps(value, ensure_ascii=False, default=str)
        if pattern.search(text):
            return format_html('<mark class="evidence">{}</mark>', text[:2 * CONTEXT_CHARS])
    return None


def _string_leaves(value: Any) -> Iterable[str]:
    """String values in document order (depth first)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, Mapping):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, (list, tuple)):
            stack.extend(reversed(item))
