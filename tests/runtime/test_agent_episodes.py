"""Episodes: isolation, binding, eviction and closing (scripted engine)."""

from __future__ import annotations

import threading

import pytest
from support.engines import ScriptedEngine

from runtime.episode import EpisodeManager
from runtime.errors import EpisodeNotFoundError, TooManyEpisodesError
from runtime.policy import HardPolicy, SoftPolicy


def test_episodes_have_their_own_session_and_state() -> None:
    manager = EpisodeManager(ScriptedEngine(), policy=SoftPolicy())
    a, b = manager.create(), manager.create()
    a.control.load("plan")
    b.control.load("write")
    assert (a.session.active, b.session.active) == ("plan", "write")
    assert a.session is not b.session
    a.session.append([1, 2, 3])
    assert list(b.session.history) == []
    assert manager.get(a.id) is a


def test_bind_returns_one_episode_per_key_even_under_races() -> None:
    manager = EpisodeManager(ScriptedEngine())
    seen: list[str] = []
    threads = [threading.Thread(target=lambda: seen.append(manager.bind("k").id)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(seen)) == 1
    assert manager.bind("other").id != seen[0]
    assert len(manager) == 2


def test_policy_is_per_episode() -> None:
    manager = EpisodeManager(ScriptedEngine(), policy=HardPolicy())
    soft = manager.create(policy=SoftPolicy())
    hard = manager.create()
    soft.control.load("write")
    assert hard.control.call("load_lora", {"capability": "write"}).is_error


def test_close_releases_the_session_and_forgets_the_episode() -> None:
    engine = ScriptedEngine()
    manager = EpisodeManager(engine)
    episode = manager.bind("mcp:1")
    manager.close(episode.id)
    assert engine.sessions[0].closed
    with pytest.raises(EpisodeNotFoundError, match="no episode"):
        manager.get(episode.id)
    with pytest.raises(EpisodeNotFoundError):
        manager.close(episode.id)
    assert manager.bind("mcp:1").id != episode.id  # a fresh one, not the closed one


def test_an_episode_is_seen_only_by_its_owner_or_without_an_owner() -> None:
    manager = EpisodeManager(ScriptedEngine())
    mine, theirs = manager.create(owner="a"), manager.create(owner="b")
    opened, _ = manager.open(owner="a")  # MCP episodes belong to their token too
    assert manager.list(owner="a") == [mine, opened]
    assert manager.list() == [mine, theirs, opened]  # no owner given: the admin's view
    assert manager.get(theirs.id, owner="b") is theirs
    with pytest.raises(EpisodeNotFoundError, match=f"no episode '{theirs.id}'"):
        manager.get(theirs.id, owner="a")


def test_full_manager_evicts_the_oldest_idle_episode() -> None:
    engine = ScriptedEngine()
    manager = EpisodeManager(engine, max_episodes=2)
    first, second = manager.create(), manager.create()
    first.status = "running"
    third = manager.create()
    assert engine.sessions[1].closed  # `second` was the oldest idle one
    with pytest.raises(EpisodeNotFoundError):
        manager.get(second.id)
    assert manager.get(first.id) is first
    third.status = "running"
    with pytest.raises(TooManyEpisodesError):
        manager.create()


def test_close_all() -> None:
    engine = ScriptedEngine()
    manager = EpisodeManager(engine)
    for _ in range(3):
        manager.create()
    manager.close_all()
    assert len(manager) == 0
    assert all(s.closed for s in engine.sessions)
