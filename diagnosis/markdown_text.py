"""Markdown written from untrusted text (tool output, model words, alert labels) that stays inert.

Framework-free (stdlib only). Every writer of served Markdown (the answer, the alert report, its
table) puts tool or model text into Markdown through these functions, so that the Markdown the API
serves renders to plain text in any CommonMark or GFM renderer, raw HTML on or off: no tag, link,
image, autolink or extra table cell can come from such text. Only what would become active is
escaped, so the raw Markdown stays readable: an ordinary sentence keeps its `>`, `*` and backticks.

- ``md_inline``: a run of text inside a sentence (a claim statement, an excerpt, a suggestion);
- ``md_code``: text shown verbatim in a code span (a service name, a label);
- ``md_cell``: a table cell (inline text whose `|` cannot split the row).

Text is flattened to one line first (a line of its own could start a block, a link definition or
raw HTML) and stripped of invisible format characters (zero-width, bidi overrides) and controls.
"""

from __future__ import annotations

import re
import unicodedata

# "<" that would open an HTML tag, comment, declaration, processing instruction or autolink.
_TAG_OPEN = re.compile(r"<(?=[A-Za-z/!?])")
# "]" that would close link text or a label before a destination, a reference or a definition.
_LINK_CLOSE = re.compile(r"\](?=[(\[:])")
_IMAGE_OPEN = re.compile(r"!\[")
# "&" that would start an entity or character reference (shown decoded, not as written).
_ENTITY = re.compile(r"&(?=#?[A-Za-z0-9]+;)")
# A backslash that would escape the next character (CommonMark escapes only ASCII punctuation).
_ESCAPING_BACKSLASH = re.compile(r"\\(?=[!-/:-@\[-`{-~])")
# What a GFM renderer links by itself (extended autolinks): URLs with a scheme, www. hosts, e-mail
# addresses, mailto:/xmpp: targets. Shown in code spans, where no renderer links anything.
_AUTOLINKABLE = re.compile(
    r"(?i)(?:\b[a-z][a-z0-9+.-]{0,31}://|\bwww\.|\b(?:mailto|xmpp):)[^\s<>`]*[^\s<>`.,;:!?)\]'\"]"
    r"|[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+"
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_BACKTICKS = re.compile(r"`+")


def plain_line(value: object) -> str:
    """The text on one line: no controls, no invisible format characters, whitespace runs as one space."""
    text = "".join(ch for ch in str(value if value is not None else "") if unicodedata.category(ch) != "Cf")
    return " ".join(_CONTROL.sub(" ", text).split())


def _fence(text: str) -> str:
    """A backtick run longer than any in `text` (a code span closes only on a run of its own length)."""
    longest = max((len(m) for m in _BACKTICKS.findall(text)), default=0)
    return "`" * (longest + 1)


def md_code(value: object, *, fence: str | None = None) -> str:
    """`value` verbatim in a code span: nothing inside a code span is parsed, linked or made HTML."""
    text = plain_line(value)
    if not text:
        return ""
    fence = fence or _fence(text)
    pad = " " if text.startswith("`") or text.endswith("`") or (text.startswith(" ") and text.endswith(" ")) else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _escape_run(text: str) -> str:
    text = _ESCAPING_BACKSLASH.sub(r"\\\\", text)
    text = _TAG_OPEN.sub(r"\\<", text)
    text = _ENTITY.sub(r"\\&", text)
    text = _IMAGE_OPEN.sub(r"!\\[", text)
    return _LINK_CLOSE.sub(r"\\]", text)


def md_inline(value: object) -> str:
    """`value` as inline Markdown text that renders as written and activates nothing.

    Escaped only where it would become active or be read otherwise than written: a `<` opening a tag
    or autolink, a `]` closing link text, `![`, an `&` starting an entity, and a backslash that would
    escape the next character. URLs and e-mail addresses (which GFM
    renderers link by themselves) go into code spans, fenced longer than any backtick run of the
    text, so no backtick of the text can pair with them.
    """
    text = plain_line(value)
    fence = _fence(text)
    out, cursor = [], 0
    for match in _AUTOLINKABLE.finditer(text):
        out.append(_escape_run(text[cursor:match.start()]))
        out.append(md_code(match.group(0), fence=fence))
        cursor = match.end()
    out.append(_escape_run(text[cursor:]))
    return "".join(out)


def md_cell(value: object, *, limit: int = 80) -> str:
    """A GFM table cell from untrusted text: `md_inline`, with every `|` escaped (GFM splits a row at
    `|` even inside code spans); "-" when empty."""
    text = plain_line(value)[:limit]
    if not text:
        return "-"
    return md_inline(text).replace("|", "\\|")


_FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def md_neutralise(markdown: object) -> str:
    """Model-written Markdown (a labelled general answer) kept as Markdown, made inert: outside fenced
    code blocks, each line gets what `md_inline` does to a run of text (tags, links, images,
    definitions and autolinkable addresses neutralised); its line breaks and list structure stay."""
    text = "".join(ch for ch in str(markdown if markdown is not None else "") if unicodedata.category(ch) != "Cf")
    text = re.sub(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]", " ", text.replace("\r\n", "\n").replace("\r", "\n"))
    out, fence = [], None
    line_fence = _fence(text)  # longer than any backtick run of the text: ours pair only with ours
    for line in text.split("\n"):
        opened = _FENCE_LINE.match(line)
        if fence is not None:
            out.append(line)
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = None
            continue
        if opened:
            fence = opened.group(1)
            out.append(line)
            continue
        parts, cursor = [], 0
        for match in _AUTOLINKABLE.finditer(line):
            parts.append(_escape_run(line[cursor:match.start()]))
            parts.append(f"{line_fence}{match.group(0)}{line_fence}")
            cursor = match.end()
        parts.append(_escape_run(line[cursor:]))
        out.append("".join(parts))
    return "\n".join(out)
