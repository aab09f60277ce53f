"""Page-number links for long lists: the first, the last, and a window around the current.

``pager(current, total, per_page, url)`` gives the links a ``<nav class="pager">`` shows;
``url(n)`` builds page ``n``'s address with the list's other query parameters kept.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlencode

WINDOW = 2


@dataclass(frozen=True)
class PageLink:
    number: int | None  # None: a gap ("…")
    url: str
    current: bool = False


@dataclass(frozen=True)
class Pager:
    current: int
    last: int
    total: int
    links: list[PageLink]
    previous: str | None
    next: str | None


def last_page(total: int, per_page: int) -> int:
    return max(1, -(-total // per_page))


def pager(current: int, total: int, per_page: int, url: Callable[[int], str]) -> Pager:
    """The links to show for page ``current`` of ``total`` items, ``per_page`` a page."""
    last = last_page(total, per_page)
    shown = sorted({1, last, *range(max(1, current - WINDOW), min(last, current + WINDOW) + 1)})
    links: list[PageLink] = []
    for number in shown:
        if links and links[-1].number is not None and number - links[-1].number > 1:
            links.append(PageLink(None, ""))
        links.append(PageLink(number, url(number), number == current))
    return Pager(
        current=current,
        last=last,
        total=total,
        links=links,
        previous=url(current - 1) if current > 1 else None,
        next=url(current + 1) if current < last else None,
    )


def query_url(path: str, params: Mapping[str, str | list[str] | None], **changes: object) -> str:
    """``path`` with ``params`` (blank ones dropped) and ``changes`` as its query string."""
    merged: dict[str, object] = {**params, **changes}
    pairs: list[tuple[str, str]] = []
    for key, value in merged.items():
        values = value if isinstance(value, list) else [value]
        pairs += [(key, str(v)) for v in values if v not in (None, "")]
    return f"{path}?{urlencode(pairs)}" if pairs else path
