"""What in a piece of HTML is active, found with a real HTML parser (html5lib: the WHATWG algorithm).

`active_markup(html, allowed_tags=…, allowed_hrefs=…)` lists every element outside the allowed set,
every event-handler or unexpected attribute, and every URL a browser would follow or load that is
not one of the allowed targets. The hostile-input tests assert the list is empty.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

import html5lib

# What the console's Markdown renderer may produce (traces/rendering.ALLOWED_TAGS) plus the parser's frame.
TEXT_TAGS = frozenset({
    "html", "head", "body", "a", "abbr", "b", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4",
    "h5", "h6", "hr", "i", "li", "ol", "p", "pre", "s", "strong", "sub", "sup", "table", "tbody", "td", "th",
    "thead", "tr", "ul", "mark", "span", "div", "section",
})
SAFE_ATTRIBUTES = frozenset({"class", "title", "start", "id", "rel"})
ALIGN = re.compile(r"^\s*text-align\s*:\s*(left|right|center)\s*;?\s*$")
URL_ATTRIBUTES = ("href", "src", "srcset", "action", "formaction", "xlink:href", "data", "poster", "background", "ping")


def citation_href(value: str) -> bool:
    """The only link the renderer itself makes: to an invocation of the run, on the same page."""
    return re.fullmatch(r"#inv-[0-9a-f]{8}", value) is not None


def active_markup(html: str, *, allowed_tags: Iterable[str] = TEXT_TAGS,
                  allowed_href: Callable[[str], bool] = citation_href) -> list[str]:
    """Every active thing in `html`: an element not allowed, an attribute that runs code or loads
    something, a URL other than an allowed link. Empty when the HTML is inert text."""
    allowed = set(allowed_tags)
    document = html5lib.parse(html, treebuilder="etree", namespaceHTMLElements=False)
    problems = []
    for element in document.iter():
        tag = element.tag if isinstance(element.tag, str) else "#comment"
        if tag == "#comment" or tag.startswith("{"):
            continue
        if tag not in allowed:
            problems.append(f"element <{tag}>")
        for name, value in element.attrib.items():
            name = name.lower()
            if name.startswith("on"):
                problems.append(f"event handler {name} on <{tag}>")
            elif name in URL_ATTRIBUTES or name.endswith("href"):
                if not (tag == "a" and name == "href" and allowed_href(value)):
                    problems.append(f"url {name}={value!r} on <{tag}>")
            elif name == "style":
                if not ALIGN.match(value):
                    problems.append(f"style {value!r} on <{tag}>")
            elif name not in SAFE_ATTRIBUTES:
                problems.append(f"attribute {name} on <{tag}>")
    return problems
