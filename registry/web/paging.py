"""Page-number links for long lists: the first, the last, and a window around the current.

``pager(current, total, per_page, url)`` gives the links a ``<nav class="pager">`` shows;
``url(n)`` builds page ``n``'s address with the list's other query parameters kept.

A count may stop at a cap (``exact=False``: ``total`` is a lower bound, shown as "10,000+"):
then the numbered links go up to the page the count reaches, and ``next`` carries on while
``more`` says a page follows. A list that pages by key passes its own ``previous`` and
``next`` addresses (with ``after=``/``before=`` the first or last id shown), so a deep page
costs what the first does; the numbered links stay within the counted pages.
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
    last: int  # the last page counted (more may follow when not `exact`)
    total: int
    links: list[PageLink]
    previous: str | None
    next: str | None
    exact: bool = True


@dataclass(frozen=True)
class Cursor:
    """The addresses of the pages before and after this one, by key (None: no such page)."""

    previous: str | None
    next: str | None


def last_page(total: int, per_page: int) -> int:
    return max(1, -(-total // per_page))


def pager(
    current: int,
    total: int,
    per_page: int,
    url: Callable[[int], str],
    *,
    exact: bool = True,
    more: bool = False,
    cursor: Cursor | None = None,
) -> Pager:
    """The links to show for page ``current`` of ``total`` items (at least, unless
    ``exact``), ``per_page`` a page; ``more``: a page follows (what decides ``next`` when
    the count is not exact or the list pages by ``cursor``)."""
    last = last_page(total, per_page)
    window = range(max(1, current - WINDOW), min(last, current + WINDOW) + 1)
    beyond = {current} if current > last and not exact else set()  # reached by key
    shown = sorted({1, last, *window} | beyond)
    links: list[PageLink] = []
    for number in shown:
        if links and links[-1].number is not None and number - links[-1].number > 1:
            links.append(PageLink(None, ""))
        links.append(PageLink(number, url(number), number == current))
    if not exact and links[-1].number is not None and links[-1].number <= last:
        links.append(PageLink(None, ""))  # past the count
    has_next = more if cursor is not None or not exact else current < last
    if cursor is not None:
        previous, following = cursor.previous, cursor.next
    else:
        previous = url(current - 1) if current > 1 else None
        following = url(current + 1) if has_next else None
    return Pager(current, last, total, links, previous, following if has_next else None, exact)


def query_url(path: str, params: Mapping[str, str | list[str] | None], **changes: object) -> str:
    """``path`` with ``params`` (blank ones dropped) and ``changes`` as its query string."""
    merged: dict[str, object] = {**params, **changes}
    pairs: list[tuple[str, str]] = []
    for key, value in merged.items():
        values = value if isinstance(value, list) else [value]
        pairs += [(key, str(v)) for v in values if v not in (None, "")]
    return f"{path}?{urlencode(pairs)}" if pairs else path
