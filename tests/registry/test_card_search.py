"""The card search through its index (migration 0012) against the plain scan it replaces.

One registry of a few versions per database. Hypothesis writes random model cards into them
(through UPDATE, so the SQLite triggers keep the FTS5 table in step) and searches random
text: pieces of the cards with their case changed, and text of its own (``%``, ``_``, ``\\``,
quotes, FTS5 syntax, letters whose case folds oddly, short queries). The versions found are
exactly the ones the plain ``lower(card) LIKE`` finds. On PostgreSQL the planner is kept off
sequential scans, so the trigram index answers where it can. Also: the migration fills the
index from the rows already there, and without the index the search still answers alike.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from factories import adapter_files, backbone_manifest_json, write_adapter, write_backbone
from harness import fresh_database
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select, text, update
from sqlalchemy.orm import Session

from registry.db.migrate import downgrade, upgrade
from registry.db.models import SqlAdapterVersion
from registry.db.session import Database
from registry.domain import Principal, Role
from registry.services import adapter_list, adapters, backbones, capabilities, card_search
from storage import open_store

ADMIN = Principal("root", Role.ADMIN)
ALICE = Principal("alice", Role.PUBLISHER)
COUNT = 6
ODD = list("aAbBzZ 1%_\\\"'*:^()-+.éÉèßẞİıKkǅǆǄΣσςﬀ😀\t\n")  # K: Kelvin sign
CHARS = st.one_of(st.sampled_from(ODD), st.characters(exclude_categories=("Cs", "Cc")))
CARDS = st.lists(st.one_of(st.none(), st.text(CHARS, max_size=30)), min_size=COUNT, max_size=COUNT)


def _build(url: str, tmp: Path) -> list[int]:
    db, store = Database(url), open_store(str(tmp / "blobs"))
    manifest = backbone_manifest_json(write_backbone(tmp / "bb"))
    with db.write() as session:
        root = backbones.register_backbone(
            session=session, store=store, actor=ADMIN, name="bb", manifest=manifest
        ).root
        capabilities.create_capability(
            session=session, actor=ADMIN, name="plan", description="", order=None
        )
    ids = []
    for i in range(COUNT):
        files = adapter_files(write_adapter(tmp / f"a{i}", seed=i + 1))
        files["README.md"] = f"# v{i}\nFinds the NEEDLE {i}.\n".encode()
        files = {name: store.put([data]) for name, data in files.items()}
        draft = adapters.AdapterDraft("plan", root, files)
        ids.append(adapters.register_adapter(database=db, store=store, actor=ALICE, draft=draft).id)
    db.dispose()
    return ids


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def built(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Database, list[int]]]:
    tmp = tmp_path_factory.mktemp("card-search")
    url = fresh_database(request, tmp)
    ids = _build(url, tmp)
    db = Database(url)
    yield db, ids
    db.dispose()


def _scan(session: Session, query: str) -> list[int]:
    """The search as it was: every card read, `lower(card) LIKE` the escaped text."""
    escaped = query.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    condition = func.lower(SqlAdapterVersion.card).like(f"%{escaped}%", escape="\\")
    return list(session.scalars(select(SqlAdapterVersion.id).where(condition).order_by("id")))


def _found(session: Session, query: str) -> list[int]:
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SET LOCAL enable_seqscan = off"))  # the index where it can
    page = adapter_list.list_adapters(session=session, text=query, limit=adapter_list.MAX_PAGE)
    assert page.total == len(page.items)
    return [a.id for a in page.items]


def _set_cards(db: Database, ids: list[int], cards: list[str | None]) -> None:
    with db.write() as session:
        for adapter_id, card in zip(ids, cards, strict=True):
            row = update(SqlAdapterVersion).where(SqlAdapterVersion.id == adapter_id)
            session.execute(row.values(card=card))


@st.composite
def queries(draw: st.DrawFn, cards: list[str | None]) -> str:
    """A piece of one of the cards, its case changed here and there, or any text."""
    texts = [c for c in cards if c]
    if texts and draw(st.booleans()):
        card = draw(st.sampled_from(texts))
        start = draw(st.integers(0, len(card) - 1))
        piece = card[start : start + draw(st.integers(1, 8))]
        flips = draw(st.lists(st.booleans(), min_size=len(piece), max_size=len(piece)))
        return "".join(c.swapcase() if f else c for c, f in zip(piece, flips, strict=True))
    return draw(st.text(CHARS, min_size=1, max_size=8))


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data(), cards=CARDS)
def test_the_index_finds_what_the_scan_finds(
    built: tuple[Database, list[int]], data: st.DataObject, cards: list[str | None]
) -> None:
    db, ids = built
    _set_cards(db, ids, cards)
    for _ in range(4):
        query = data.draw(queries(cards).filter(lambda q: bool(q.strip())), label="query")
        with db.read() as session:
            assert _found(session, query) == _scan(session, query), (query, cards)


def test_the_index_is_used_and_kept_in_step(built: tuple[Database, list[int]]) -> None:
    db, ids = built
    _set_cards(db, ids, [f"card {i}: a NEEDLE" if i % 2 else None for i in range(COUNT)])
    with db.read() as session:
        sqlite = session.get_bind().dialect.name == "sqlite"
        assert card_search.uses_index(session) is sqlite
        everything = select(SqlAdapterVersion)
        query, _ = card_search.narrow(everything, session=session, text="needle")
        assert ("MATCH" in str(query)) is sqlite
        query, _ = card_search.narrow(everything, session=session, text="ne")
        assert "MATCH" not in str(query)  # no trigram
        assert _found(session, "needle") == ids[1::2]
        if sqlite:  # the FTS5 table agrees with the cards it indexes
            session.execute(
                text("INSERT INTO adapter_versions_fts(adapter_versions_fts, rank) "
                     "VALUES ('integrity-check', 1)")
            )  # fmt: skip
        else:
            indexes = session.scalars(
                text("SELECT indexname FROM pg_indexes WHERE tablename = 'adapter_versions'")
            )
            assert "ix_adapter_versions_card_trgm" in set(indexes)


def test_the_migration_fills_the_index_and_the_search_works_without_it(
    sqlite_template: Path, tmp_path: Path
) -> None:
    path = tmp_path / "registry.db"
    shutil.copyfile(sqlite_template, path)
    url = f"sqlite:///{path}"
    ids = _build(url, tmp_path)
    downgrade(url, "0011")  # no index: the search reads every card
    db = Database(url)
    with db.read() as session:
        assert not card_search.uses_index(session)
        assert _found(session, "needle 3") == [ids[3]] == _scan(session, "needle 3")
    db.dispose()
    upgrade(url)  # the index, filled from the rows already there
    db = Database(url)
    with db.read() as session:
        assert card_search.uses_index(session)
        assert _found(session, "NEEDLE") == ids
        assert _found(session, "needle 3") == [ids[3]]
    db.dispose()
