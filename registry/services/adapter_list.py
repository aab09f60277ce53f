"""Listing and searching adapter versions: `list_adapters`, the adapter list's one query.

Its cost should not grow with the table beyond what the page and the capped count need
(issue 29):

- No join in the filters: the capability and the backbone are matched by id (a subquery
  run once), so neither the count nor a scan for text looks up a capability per row. The
  join stays only for the `name` order, which sorts by the capability's name, and only in
  the page's query, not in the count.
- `offset` skips ids, not rows: the page's ids are picked first (the filters and the order
  alone, no row read beyond what they need) and only those versions are loaded. `offset`
  is at most `MAX_OFFSET` (the count's cap: page numbers never go further); deeper pages
  go by key (`after`), which costs the same at any depth.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Select, and_, func, select
from sqlalchemy.orm import Session, aliased

from registry.db.convert import to_adapter
from registry.db.models import SqlAdapterTag, SqlAdapterVersion, SqlBackbone, SqlCapability
from registry.domain import AdapterState, Page
from registry.errors import InvalidError
from registry.services.card_search import narrow
from registry.services.tags import parse_tag, search_filters

MAX_PAGE = 1000
SORTS = {
    "oldest": (SqlAdapterVersion.id,),
    "newest": (SqlAdapterVersion.id.desc(),),
    "name": (SqlCapability.name, SqlAdapterVersion.version),
    "state": (SqlAdapterVersion.state, SqlAdapterVersion.id),
    "label": (SqlAdapterVersion.label.is_(None), SqlAdapterVersion.label, SqlAdapterVersion.id),
}
"""How `list_adapters` orders versions (each order is total: ties fall back to the id)."""
KEYSET_SORTS = ("oldest", "newest")  # the orders `after` and `before` page by key
COUNT_CAP = 10_000
"""A page's `total` counts this many matches at most (reading more would grow with the
table); past it, `total_exact` is False and `total` is a lower bound."""
MAX_OFFSET = 10_000
"""The deepest `offset` (a page past it: 422, pointing to `after`). Skipping still reads
the skipped ids, so an unbounded offset would grow with the table; 10,000 is the count's
cap, as deep as page numbers go."""


def list_adapters(
    *,
    session: Session,
    capability: str | None = None,
    backbone: str | None = None,
    state: str | None = None,
    limit: int = 100,
    offset: int = 0,
    tags: list[str] | None = None,
    label: str | None = None,
    parent_id: int | None = None,
    text: str | None = None,
    sort: str = "oldest",
    after: int | None = None,
    before: int | None = None,
) -> Page:
    """Adapters filtered by capability name, backbone root, state, `key=value` tags (all),
    label, parent and text in the model card; ordered by `sort` (one of `SORTS`).

    `after` keeps the versions past that id (above it; below it with the `newest` order):
    with the `oldest` and `newest` orders it pages by key (the next page starts after the
    last id of this one, and its cost does not grow with the page's depth, unlike
    `offset`, whose skipped ids are still read: at most `MAX_OFFSET`). `before` (same
    orders) gives the page that ends just before that id: the previous page, by key.
    `total` counts the matches, whatever the page, up to `COUNT_CAP` (`total_exact` False
    past it).
    """
    _check(limit=limit, offset=offset, after=after, before=before, state=state, sort=sort)
    query = select(SqlAdapterVersion)
    if capability is not None:
        by_name = select(SqlCapability.id).where(SqlCapability.name == capability)
        query = query.where(SqlAdapterVersion.capability_id == by_name.scalar_subquery())
    if backbone is not None:
        by_root = select(SqlBackbone.id).where(SqlBackbone.root == backbone)
        query = query.where(SqlAdapterVersion.backbone_id == by_root.scalar_subquery())
    if state is not None:
        query = query.where(SqlAdapterVersion.state == state)
    query, key, counted = _filtered(query, session=session, tags=list(tags or ()), text=text)
    query = search_filters(query, tags=(), label=label, parent_id=parent_id)
    if (capability, backbone, state, label, parent_id) != (None,) * 5:
        counted = None  # other filters: count the query itself
    ids = query.with_only_columns(SqlAdapterVersion.id) if counted is None else counted
    total = _count(session, ids)
    newest = sort == "newest"
    if after is not None:
        query = query.where(key < after if newest else key > after)
    if before is not None:  # the rows just before it, read backwards, then put in order
        query = query.where(key > before if newest else key < before)
        rows = list(session.scalars(query.order_by(key if newest else key.desc()).limit(limit)))
        rows.reverse()
    else:
        if sort == "name":
            query = query.join(SqlAdapterVersion.capability)
        order = SORTS[sort] if sort not in KEYSET_SORTS else (key.desc() if newest else key,)
        rows = _page(session, query.order_by(*order), limit=limit, offset=offset)
    items = [to_adapter(r) for r in rows]
    return Page(items=items, total=min(total, COUNT_CAP), total_exact=total <= COUNT_CAP)


def _filtered(
    query: Select[Any], *, session: Session, tags: list[str], text: str | None
) -> tuple[Select[Any], ColumnElement[int], Select[Any] | None]:
    """`query` kept to the versions with every tag and the text, the column to order and
    page by, and (tags alone) a count on the tags' index.

    With tags and no text, the first tag's rows are joined: in SQLite the index
    `(key, value, adapter_id)` then gives the versions in id order, read lazily (a page
    stops early), where an `IN` list would gather every match first; and the count needs
    no version row (every tag row names a version: a foreign key). With text, the text's
    index drives (`card_search.narrow`) and each tag is an `IN`."""
    if not tags or text is not None:
        query, key = narrow(search_filters(query, tags=tags), session=session, text=text)
        return query, key, None
    first = aliased(SqlAdapterTag)
    tag_key, tag_value = parse_tag(tags[0])
    holds = (first.key == tag_key, first.value == tag_value)
    query = query.join(first, and_(first.adapter_id == SqlAdapterVersion.id, *holds))
    counted = select(first.adapter_id).where(*holds)
    for tag in tags[1:]:
        other_key, other_value = parse_tag(tag)
        also = select(SqlAdapterTag.adapter_id).where(
            SqlAdapterTag.key == other_key, SqlAdapterTag.value == other_value
        )
        query = query.where(SqlAdapterVersion.id.in_(also.scalar_subquery()))
        counted = counted.where(first.adapter_id.in_(also.scalar_subquery()))
    return query, first.adapter_id.expression, counted


def _count(session: Session, ids: Select[Any]) -> int:
    """The rows of `ids` (one column), up to `COUNT_CAP + 1`."""
    counted = ids.limit(COUNT_CAP + 1).subquery()
    return session.scalar(select(func.count()).select_from(counted)) or 0


def _check(
    *, limit: int, offset: int, after: int | None, before: int | None, state: str | None, sort: str
) -> None:
    if not 1 <= limit <= MAX_PAGE or offset < 0:
        raise InvalidError(f"limit must be 1..{MAX_PAGE} and offset >= 0")
    if offset > MAX_OFFSET:
        raise InvalidError(
            f"offset must be at most {MAX_OFFSET}: page deeper by key, with after=<the last "
            "id of a page> in the oldest or newest order (its cost does not grow with depth)"
        )
    if (after is not None and after < 0) or (before is not None and before < 0):
        raise InvalidError("after and before must be >= 0")
    if before is not None and (after is not None or offset or sort not in KEYSET_SORTS):
        raise InvalidError("before pages by key in the oldest and newest orders, alone")
    if state is not None and state not in {s.value for s in AdapterState}:
        raise InvalidError(f"unknown state {state!r}; one of {[s.value for s in AdapterState]}")
    if sort not in SORTS:
        raise InvalidError(f"unknown sort {sort!r}; one of {list(SORTS)}")


def _page(
    session: Session, ordered: Select[Any], *, limit: int, offset: int
) -> list[SqlAdapterVersion]:
    """The rows of `ordered` from `offset`, `limit` of them. With an offset the ids come
    first: the skipped rows are stepped over by id alone (no row read, no join of the
    loaded version's capability and backbone for each), then the page's rows are loaded."""
    if not offset:
        return list(session.scalars(ordered.limit(limit)))
    id_column: ColumnElement[int] = SqlAdapterVersion.id.expression
    ids = list(session.scalars(ordered.with_only_columns(id_column).limit(limit).offset(offset)))
    loaded = session.scalars(select(SqlAdapterVersion).where(SqlAdapterVersion.id.in_(ids)))
    by_id = {row.id: row for row in loaded}
    return [by_id[i] for i in ids if i in by_id]  # one deleted since: left out
