"""Concurrent writers on each database: gap-free versions, no lost promotes, one chain."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from harness import World

from registry.domain import Principal, Role
from registry.errors import RevisionConflictError
from registry.services import adapters, channels, events

T = TypeVar("T")
THREADS = 8
ALICE = Principal(name="alice", role=Role.PUBLISHER)
BOB = Principal(name="bob", role=Role.APPROVER)


def _at_once(work: Callable[[int], T]) -> list[T | BaseException]:
    """Run ``work(i)`` on THREADS threads released together; results or exceptions."""
    barrier = threading.Barrier(THREADS)
    results: list[T | BaseException] = [RuntimeError("not run")] * THREADS

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = work(i)
        except BaseException as exc:  # noqa: BLE001 - collected for the assertions
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


def _verified(world: World) -> None:
    with world.api.db.read() as session:
        assert events.verify(session=session).ok


def test_concurrent_registrations_get_versions_1_to_n(world: World) -> None:
    api = world.api
    drafts = [
        adapters.AdapterDraft(
            capability="write", backbone=world.backbone, files=api.upload_adapter(seed=i)
        )
        for i in range(THREADS)
    ]

    def register(i: int) -> int:
        return adapters.register_adapter(
            database=api.db, store=api.store, actor=ALICE, draft=drafts[i]
        ).version

    results = _at_once(register)
    assert sorted(results) == list(range(1, THREADS + 1)), results  # type: ignore[type-var]
    _verified(world)


def _approved_per_capability(world: World) -> dict[str, int]:
    ids = {}
    for i in range(THREADS):
        cap = f"cap{i}"
        world.api.capability(cap)
        ids[cap] = world.approved(cap, seed=i)["id"]
    return ids


def test_concurrent_promotes_lose_no_update(world: World) -> None:
    api = world.api
    ids = _approved_per_capability(world)

    def promote(i: int) -> int:
        request = channels.PromoteRequest(
            channel="prod",
            backbone=world.backbone,
            adapters={f"cap{i}": ids[f"cap{i}"]},
            order=None,
            create=True,
        )
        with api.db.write() as session:
            return channels.promote(session=session, actor=BOB, request=request).revision.revision

    results = _at_once(promote)
    assert sorted(results) == list(range(1, THREADS + 1)), results  # type: ignore[type-var]
    head = api.ok("GET", "/channels/prod", "reader")
    assert head["revision"] == THREADS
    assert set(head["library"]) == set(ids)
    _verified(world)


def test_concurrent_promotes_with_expected_revision_one_wins(world: World) -> None:
    api = world.api
    ids = _approved_per_capability(world)
    world.promote({"cap0": ids["cap0"]})

    def promote(i: int) -> int:
        request = channels.PromoteRequest(
            channel="prod",
            backbone=None,
            adapters={f"cap{i}": ids[f"cap{i}"]},
            order=["cap0"],
            expected_revision=1,
        )
        with api.db.write() as session:
            return channels.promote(session=session, actor=BOB, request=request).revision.revision

    results = _at_once(promote)
    wins = [r for r in results if r == 2]
    conflicts = [r for r in results if isinstance(r, RevisionConflictError)]
    assert len(wins) == 1, results
    assert len(conflicts) == THREADS - 1, results
    assert api.ok("GET", "/channels/prod", "reader")["revision"] == 2
    _verified(world)
