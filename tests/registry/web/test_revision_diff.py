"""The revision diff on random libraries (hypothesis): it is exactly the set of capabilities
whose adapter differs, it undoes itself when reversed, and a revision equals itself."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from registry.domain import LibraryEntry, Revision
from registry.web.diff import Change, diff_revisions, history

CAPABILITIES = ("code", "plan", "search", "write")
WHEN = datetime(2026, 1, 1, tzinfo=UTC)


def entry(capability: str, adapter_id: int) -> LibraryEntry:
    return LibraryEntry(adapter_id, f"{capability}@{adapter_id}", f"{adapter_id:064x}", {})


libraries = st.dictionaries(st.sampled_from(CAPABILITIES), st.integers(1, 4))
orders = st.lists(st.sampled_from(CAPABILITIES), unique=True, max_size=4)


def revision(number: int, library: dict[str, int], order: list[str]) -> Revision:
    return Revision(
        channel="prod",
        backbone="b" * 64,
        revision=number,
        library={cap: entry(cap, adapter_id) for cap, adapter_id in library.items()},
        order=order,
        library_digest=f"{number:064x}",
        created_by="bob",
        created_at=WHEN,
        reason=None,
    )


@given(libraries, libraries, orders, orders)
def test_the_diff_is_the_changed_capabilities(
    old: dict[str, int], new: dict[str, int], old_order: list[str], new_order: list[str]
) -> None:
    diff = diff_revisions(revision(1, old, old_order), revision(2, new, new_order))
    kinds = {c.capability: c.change for c in diff.capabilities}
    assert set(kinds) == old.keys() | new.keys()
    for cap, kind in kinds.items():
        if cap not in old:
            assert kind is Change.ADDED
        elif cap not in new:
            assert kind is Change.REMOVED
        else:
            assert kind is (Change.UNCHANGED if old[cap] == new[cap] else Change.CHANGED)
    for change in diff.changes:  # from which version to which
        assert (change.before.adapter_id if change.before else None) == old.get(change.capability)
        assert (change.after.adapter_id if change.after else None) == new.get(change.capability)
    assert diff.order_changed == (old_order != new_order)
    assert diff.empty == (old == new and old_order == new_order)
    back = diff_revisions(revision(2, new, new_order), revision(1, old, old_order))
    flipped = {Change.ADDED: Change.REMOVED, Change.REMOVED: Change.ADDED}
    assert {c.capability: c.change for c in back.capabilities} == {
        cap: flipped.get(kind, kind) for cap, kind in kinds.items()
    }


@given(st.lists(st.tuples(libraries, orders), min_size=1, max_size=6))
def test_history_pairs_each_revision_with_the_one_before(
    steps: list[tuple[dict[str, int], list[str]]],
) -> None:
    revisions = [revision(i + 1, lib, order) for i, (lib, order) in enumerate(steps)]
    pairs = history(revisions)
    assert [r.revision for r, _ in pairs] == list(range(len(steps), 0, -1))  # newest first
    assert pairs[-1][1] is None
    for current, diff in pairs[:-1]:
        assert diff is not None
        assert (diff.before.revision, diff.after.revision) == (
            current.revision - 1,
            current.revision,
        )
