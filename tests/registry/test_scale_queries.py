"""Keyset pages, newest-first pages and lineage against a plain walk over every row.

One registry per database (SQLite, PostgreSQL), built once through the service layer: 36
versions over three capabilities, with states, tags, card text and parent chains (a long
one and a branching one). Hypothesis then draws filters and page sizes: walking the pages
by `after` (either direction) must give exactly the matches, in order, each once, with
`total` the count of all of them, and the same as offset pages; lineage must give the
ancestors and descendants a walk over `parent_id` finds.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from factories import adapter_files, backbone_manifest_json, write_adapter, write_backbone
from harness import fresh_database
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from registry.db.session import Database
from registry.domain import AdapterVersion, Principal, Role
from registry.services import adapter_list, adapters, backbones, capabilities, lifecycle, lineage
from storage import open_store

ADMIN = Principal("root", Role.ADMIN)
ALICE = Principal("alice", Role.PUBLISHER)
CAPS = ("plan", "write", "code")
COUNT = 36
STATES = ("candidate", "approved", "rejected")


def _parent(i: int, ids: list[int]) -> int | None:
    """Versions 0, 3, 6, ... of `plan` form one chain; each `code` version after the first
    two hangs off one of them (a tree)."""
    if i % 3 == 0 and i >= 3:
        return ids[i - 3]
    if i % 3 == 2 and i >= 8:
        return ids[2 + 3 * (i % 2)]
    return None


def _build(url: str, tmp: Path) -> list[AdapterVersion]:
    db, store = Database(url), open_store(str(tmp / "blobs"))
    manifest = backbone_manifest_json(write_backbone(tmp / "bb"))
    with db.write() as session:
        root = backbones.register_backbone(
            session=session, store=store, actor=ADMIN, name="bb", manifest=manifest
        ).root
        for name in CAPS:
            capabilities.create_capability(
                session=session, actor=ADMIN, name=name, description="", order=None
            )
    ids: list[int] = []
    for i in range(COUNT):
        files = adapter_files(write_adapter(tmp / f"a{i}", seed=i + 1))
        if i % 4 == 0:
            files["README.md"] = f"# v{i}\nFinds the needle.\n".encode()
        draft = adapters.AdapterDraft(
            CAPS[i % 3],
            root,
            {name: store.put([data]) for name, data in files.items()},
            parent_id=_parent(i, ids),
            tags={"team": f"t{i % 2}", "run": f"r{i % 5}"},
        )
        ids.append(adapters.register_adapter(database=db, store=store, actor=ALICE, draft=draft).id)
    with db.write() as session:
        for i, adapter_id in enumerate(ids):
            if i % 5 in (1, 3):
                lifecycle.approve_adapter(session=session, actor=ADMIN, adapter_id=adapter_id)
            elif i % 5 == 4:
                lifecycle.reject_adapter(session=session, actor=ADMIN, adapter_id=adapter_id)
        every = adapter_list.list_adapters(session=session, limit=adapter_list.MAX_PAGE).items
    db.dispose()
    return every


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def built(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Database, list[AdapterVersion]]]:
    tmp = tmp_path_factory.mktemp("scale-queries")
    url = fresh_database(request, tmp)
    every = _build(url, tmp)
    db = Database(url)
    yield db, every
    db.dispose()


FILTERS = st.fixed_dictionaries(
    {},
    optional={
        "capability": st.sampled_from(CAPS),
        "state": st.sampled_from(STATES),
        "tags": st.sampled_from([["team=t0"], ["run=r3"], ["team=t1", "run=r1"]]),
        "text": st.sampled_from(["needle", "NEEDLE", "haystack"]),
    },
)


def _matches(adapter: AdapterVersion, filters: dict[str, Any]) -> bool:
    tags = dict(t.split("=") for t in filters.get("tags", []))
    return (
        filters.get("capability", adapter.capability) == adapter.capability
        and filters.get("state", adapter.state.value) == adapter.state.value
        and all(adapter.tags.get(k) == v for k, v in tags.items())
        and ("text" not in filters or filters["text"].lower() in (adapter.card or "").lower())
    )


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(filters=FILTERS, limit=st.integers(1, 7), newest_first=st.booleans())
def test_keyset_pages_walk_every_match_once(
    built: tuple[Database, list[AdapterVersion]],
    filters: dict[str, Any],
    limit: int,
    newest_first: bool,
) -> None:
    db, every = built
    sort = "newest" if newest_first else "oldest"
    expected = [a.id for a in every if _matches(a, filters)]
    if newest_first:
        expected.reverse()
    walked: list[int] = []
    after: int | None = None
    with db.read() as session:
        while True:
            page = adapter_list.list_adapters(
                session=session, limit=limit, after=after, sort=sort, **filters
            )
            assert page.total == len(expected)
            assert len(page.items) <= limit
            if not page.items:
                break
            walked += [a.id for a in page.items]
            after = page.items[-1].id
        by_offset = [
            a.id
            for start in range(0, len(expected) + limit, limit)
            for a in adapter_list.list_adapters(
                session=session, limit=limit, offset=start, sort=sort, **filters
            ).items
        ]
    assert walked == expected
    assert by_offset == expected


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(index=st.integers(0, COUNT - 1))
def test_lineage_is_the_walk_over_parents(
    built: tuple[Database, list[AdapterVersion]], index: int
) -> None:
    db, every = built
    by_id = {a.id: a for a in every}
    adapter = every[index]
    ancestors, parent = [], adapter.parent_id
    while parent is not None:
        ancestors.insert(0, parent)
        parent = by_id[parent].parent_id
    below, frontier = set(), {adapter.id}
    while frontier:
        frontier = {a.id for a in every if a.parent_id in frontier}
        below |= frontier
    with db.read() as session:
        found = lineage.lineage(session=session, adapter_id=adapter.id)
    assert [a.id for a in found.ancestors] == ancestors
    assert found.adapter.id == adapter.id
    assert [a.id for a in found.descendants] == sorted(below)


def test_a_long_chain_is_found_whole(built: tuple[Database, list[AdapterVersion]]) -> None:
    db, every = built
    tip = max((a for a in every if a.capability == "plan"), key=lambda a: a.id)
    with db.read() as session:
        found = lineage.lineage(session=session, adapter_id=tip.id)
    assert len(found.ancestors) == COUNT // 3 - 1  # every other plan version, oldest first
    assert [a.id for a in found.ancestors] == sorted(a.id for a in found.ancestors)


def test_after_keeps_the_versions_past_it_in_any_order(
    built: tuple[Database, list[AdapterVersion]],
) -> None:
    db, every = built
    with db.read() as session:
        named = adapter_list.list_adapters(
            session=session, limit=adapter_list.MAX_PAGE, after=3, sort="name"
        )
        skipped = adapter_list.list_adapters(
            session=session, limit=adapter_list.MAX_PAGE, after=3, offset=2
        )
    assert sorted(a.id for a in named.items) == [a.id for a in every if a.id > 3]
    assert [a.id for a in skipped.items] == [a.id for a in every if a.id > 3][2:]
