"""Model cards as HTML (registry.web.markdown): markdown renders, nothing a card says runs."""

from __future__ import annotations

import pytest

from registry.web.markdown import render_card, sanitise


def test_markdown_renders_headings_lists_code_and_tables() -> None:
    html = render_card("# Title\n\n- *one*\n- `two`\n\n| a | b |\n|---|---|\n| 1 | 2 |\n")
    assert "<h1>Title</h1>" in html
    assert "<li><em>one</em></li>" in html
    assert "<li><code>two</code></li>" in html
    assert "<td>1</td>" in html


@pytest.mark.parametrize(
    "card",
    [
        "<script>alert(1)</script>",
        "text <img src=x onerror=alert(1)> more",
        '<a href="javascript:alert(1)">x</a>',
        "<iframe src=/></iframe>",
        "```\n</code></pre><script>alert(1)</script>\n```",
    ],
)
def test_raw_html_stays_text(card: str) -> None:
    html = render_card(card)
    assert "<script" not in html
    assert "<img" not in html
    assert "<iframe" not in html
    assert "<a " not in html
    assert "&lt;" in html


@pytest.mark.parametrize(
    "link",
    [
        "javascript:alert(1)",
        "JaVaScRiPt:alert(1)",
        "data:text/html,<b>x</b>",
        "vbscript:x",
        "//evil",
    ],
)
def test_only_safe_links_become_links(link: str) -> None:
    assert "<a " not in render_card(f"[click]({link})")


def test_links_and_images_point_nowhere_surprising() -> None:
    html = render_card("[docs](https://example.org/a) ![chart](https://tracker.example/p.png)")
    assert '<a href="https://example.org/a" rel="nofollow noopener noreferrer">docs</a>' in html
    assert "<img" not in html  # an image would be fetched from another host: a link instead
    assert 'href="https://tracker.example/p.png"' in html


def test_the_sanitiser_drops_what_is_not_allowed() -> None:
    dirty = (
        '<p onclick="x()">hi <b>there</b><a href="javascript:x" title="t">l</a></p>'
        "<style>*{}</style>"
    )
    clean = sanitise(dirty)
    assert clean == '<p>hi there<a title="t" rel="nofollow noopener noreferrer">l</a></p>*{}'
