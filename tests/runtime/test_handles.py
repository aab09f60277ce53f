"""runtime.handles: secret episode handles, bound to their owner, expiring when idle."""

from __future__ import annotations

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from runtime.errors import ForeignHandleError, UnknownHandleError
from runtime.handles import HandleTable, owner_of


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_handles_are_secret_and_distinct() -> None:
    table = HandleTable(idle_s=10)
    handles = {table.mint("e", owner="o") for _ in range(200)}
    assert len(handles) == 200
    assert all(len(h) >= 43 for h in handles)  # 32 random bytes, url-safe base64
    assert not set(table._entries) & handles  # only digests are kept


def test_use_refreshes_and_idleness_expires() -> None:
    clock = Clock()
    table = HandleTable(idle_s=10, clock=clock)
    handle = table.mint("e1", owner="o")
    for _ in range(5):  # used every 8 s: alive for 40 s
        clock.now += 8
        assert table.resolve(handle, owner="o") == "e1"
    clock.now += 10.5
    with pytest.raises(UnknownHandleError, match="call open_episode"):
        table.resolve(handle, owner="o")
    assert table.expire() == ["e1"]
    assert len(table) == 0


def test_other_owner_and_revoked_handles_are_refused() -> None:
    table = HandleTable(idle_s=10)
    handle = table.mint("e1", owner=owner_of("Bearer a"))
    with pytest.raises(ForeignHandleError):
        table.resolve(handle, owner=owner_of("Bearer b"))
    with pytest.raises(ForeignHandleError):
        table.revoke(handle, owner=owner_of("Bearer b"))
    assert table.revoke(handle, owner=owner_of("Bearer a")) == "e1"
    with pytest.raises(UnknownHandleError):
        table.resolve(handle, owner=owner_of("Bearer a"))


def test_owner_of() -> None:
    assert owner_of(None) == owner_of("") == ""
    assert owner_of("Bearer a") != owner_of("Bearer b")
    assert "Bearer" not in owner_of("Bearer a")


def test_idle_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        HandleTable(idle_s=0)


class HandleMachine(RuleBasedStateMachine):
    """A handle resolves iff it was minted, not revoked, asked by its owner, not idle too long."""

    IDLE = 10.0

    def __init__(self) -> None:
        super().__init__()
        self.clock = Clock()
        self.table = HandleTable(idle_s=self.IDLE, clock=self.clock)
        self.model: dict[str, tuple[str, str, float]] = {}  # handle -> (episode, owner, last)
        self.gone: list[str] = []
        self.count = 0

    def _alive(self, handle: str) -> bool:
        return handle in self.model and self.clock.now - self.model[handle][2] <= self.IDLE

    @rule(owner=st.sampled_from(["a", "b"]))
    def mint(self, owner: str) -> None:
        self.count += 1
        handle = self.table.mint(f"e{self.count}", owner=owner)
        self.model[handle] = (f"e{self.count}", owner, self.clock.now)

    @rule(dt=st.floats(min_value=0, max_value=8))
    def wait(self, dt: float) -> None:
        self.clock.now += dt

    @precondition(lambda self: self.model or self.gone)
    @rule(data=st.data(), owner=st.sampled_from(["a", "b"]))
    def resolve(self, data: st.DataObject, owner: str) -> None:
        handle = data.draw(st.sampled_from(sorted(self.model) + self.gone))
        if not self._alive(handle):
            with pytest.raises(UnknownHandleError):
                self.table.resolve(handle, owner=owner)
            return
        episode, real_owner, _ = self.model[handle]
        if owner != real_owner:
            with pytest.raises(ForeignHandleError):
                self.table.resolve(handle, owner=owner)
            return
        assert self.table.resolve(handle, owner=owner) == episode
        self.model[handle] = (episode, owner, self.clock.now)

    @rule()
    def expire(self) -> None:
        expired = self.table.expire()
        dead = [h for h in self.model if not self._alive(h)]
        assert sorted(expired) == sorted(self.model[h][0] for h in dead)
        for handle in dead:
            del self.model[handle]
            self.gone.append(handle)

    @invariant()
    def sizes_agree(self) -> None:
        assert len(self.table) == len(self.model)


TestHandleMachine = HandleMachine.TestCase
