"""Model cards as HTML: CommonMark (and tables) with raw HTML off, then sanitised.

A card is written by whoever pushed the version, so it is untrusted: markdown-it renders it
with ``html`` disabled (a ``<script>`` in the card is text), links only to http(s), mailto,
same-site paths and anchors, images shown as links (no request to another host), and the
result goes through an allow-list of tags and attributes before it reaches a page (no
style attributes: the page's policy allows no inline style). The
page's Content-Security-Policy (no inline script) stays the last line of defence.
"""

from __future__ import annotations

import functools
import html
import re
from html.parser import HTMLParser
from typing import TYPE_CHECKING

from markupsafe import Markup

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

SAFE_LINK = re.compile(r"^(https?:|mailto:|/(?!/)|#|\./|[A-Za-z0-9_.-]+(?:/|$|#))", re.IGNORECASE)
TAGS = {
    "p", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "em", "strong", "code", "pre",
    "blockquote", "hr", "br", "a", "table", "thead", "tbody", "tr", "th", "td", "del",
}  # fmt: skip
VOID = {"hr", "br"}
ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}, "code": {"class"}}
CODE_CLASS = re.compile(r"^language-[A-Za-z0-9_+-]{1,32}$")


def _safe_link(url: str) -> bool:
    return bool(SAFE_LINK.match(url.strip()))


@functools.cache
def _parser() -> MarkdownIt:
    """Built on the first card rendered: importing markdown-it compiles its patterns, about
    20 ms of every `weact serve` start otherwise (`python -X importtime`)."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable("table")
    md.disable("image")  # an image would be fetched from wherever the card points
    md.validateLink = _safe_link  # type: ignore[method-assign]
    return md


class _Sanitiser(HTMLParser):
    """Keeps allowed tags with allowed attributes; escapes all text again; drops the rest."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []

    def _attributes(self, tag: str, attrs: list[tuple[str, str | None]]) -> str:
        kept: list[str] = []
        for name, value in attrs:
            if name not in ATTRIBUTES.get(tag, set()) or value is None:
                continue
            if name == "href" and not _safe_link(value):
                continue
            if name == "class" and not CODE_CLASS.match(value):
                continue
            if name == "start" and not value.isdigit():
                continue
            kept.append(f' {name}="{html.escape(value, quote=True)}"')
        if tag == "a":
            kept.append(' rel="nofollow noopener noreferrer"')
        return "".join(kept)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in TAGS:
            self.out.append(f"<{tag}{self._attributes(tag, attrs)}>")

    def handle_endtag(self, tag: str) -> None:
        if tag in TAGS and tag not in VOID:
            self.out.append(f"</{tag}>")

    def handle_data(self, data: str) -> None:
        self.out.append(html.escape(data, quote=False))


def sanitise(fragment: str) -> str:
    """``fragment`` with only the allowed tags and attributes (see the module docstring)."""
    parser = _Sanitiser()
    parser.feed(fragment)
    parser.close()
    return "".join(parser.out)


def render_card(text: str) -> Markup:
    """A model card's markdown as sanitised HTML, safe to put in a page."""
    return Markup(sanitise(_parser().render(text)))  # noqa: S704 - sanitised just above
