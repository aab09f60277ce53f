"""Property test: adapter lifecycle, channel revisions and version counts against a simple
model."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from factories import adapter_files, backbone_manifest_json, write_adapter, write_backbone
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    rule,
    run_state_machine_as_test,
)

from registry.db.migrate import upgrade
from registry.db.session import Database
from registry.domain import Principal, Role
from registry.errors import ConflictError, InvalidError, InvalidStateError, RegistryError
from registry.services import (
    adapters,
    backbones,
    capabilities,
    channels,
    events,
    lifecycle,
    version_counts,
)
from storage import LocalBlobStore

ALICE = Principal("alice", Role.PUBLISHER)
BOB = Principal("bob", Role.APPROVER)
CAPS = ("plan", "write")
MOVES = {
    ("candidate", "approve"): "approved",
    ("candidate", "reject"): "rejected",
    ("approved", "revoke"): "revoked",
}


@dataclass(frozen=True)
class Prepared:
    database: Path
    store: Path
    backbone: str
    files: list[dict[str, str]]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Prepared:
    tmp = tmp_path_factory.mktemp("machine")
    url = f"sqlite:///{tmp / 'template.db'}"
    upgrade(url)
    store = LocalBlobStore(tmp / "blobs")
    db = Database(url)
    manifest = backbone_manifest_json(write_backbone(tmp / "bb"))
    with db.write() as session:
        root = backbones.register_backbone(
            session=session, store=store, actor=BOB, name="bb", manifest=manifest
        ).root
        for cap in CAPS:
            capabilities.create_capability(
                session=session, actor=BOB, name=cap, description="", order=None
            )
    db.dispose()
    files = []
    for seed in range(3):
        data = adapter_files(write_adapter(tmp / f"a{seed}", seed=seed))
        files.append({name: store.put([blob]) for name, blob in data.items()})
    return Prepared(tmp / "template.db", tmp / "blobs", root, files)


class Lifecycle(RuleBasedStateMachine):
    prepared: Prepared
    counter = 0

    adapters_ = Bundle("adapters")

    def __init__(self) -> None:
        super().__init__()
        Lifecycle.counter += 1
        path = self.prepared.database.with_name(f"run{Lifecycle.counter}.db")
        shutil.copyfile(self.prepared.database, path)
        self.path = path
        self.db = Database(f"sqlite:///{path}")
        self.store = LocalBlobStore(self.prepared.store)
        self.states: dict[int, str] = {}
        self.caps: dict[int, str] = {}
        self.versions: dict[str, int] = dict.fromkeys(CAPS, 0)
        self.library: dict[str, int] = {}
        self.history: list[dict[str, int]] = []
        self.contents: dict[tuple[str, int], int] = {}  # (capability, file set) -> id

    def teardown(self) -> None:
        self.db.dispose()
        self.path.unlink(missing_ok=True)

    def _call(self, fn: Any, **kw: Any) -> Any:
        with self.db.write() as session:
            return fn(session=session, **kw)

    def _register(self, draft: adapters.AdapterDraft) -> Any:
        return adapters.register_adapter(
            database=self.db, store=self.store, actor=ALICE, draft=draft
        )

    @rule(target=adapters_, cap=st.sampled_from(CAPS), files=st.integers(0, 2))
    def register(self, cap: str, files: int) -> int:
        draft = adapters.AdapterDraft(cap, self.prepared.backbone, self.prepared.files[files])
        if (cap, files) in self.contents:  # identical bytes: refused, naming the version
            existing = self.contents[(cap, files)]
            with pytest.raises(ConflictError) as refused:
                self._register(draft)
            assert refused.value.detail["adapter_id"] == existing
            return existing
        adapter = self._register(draft)
        self.contents[(cap, files)] = adapter.id
        self.versions[cap] += 1
        assert adapter.version == self.versions[cap]
        self.states[adapter.id], self.caps[adapter.id] = "candidate", cap
        return int(adapter.id)

    @rule(adapter=adapters_, action=st.sampled_from(["approve", "reject", "revoke"]))
    def decide(self, adapter: int, action: str) -> None:
        fn = getattr(lifecycle, f"{action}_adapter")
        target = MOVES.get((self.states[adapter], action))
        if target is None:
            with pytest.raises(InvalidStateError):
                self._call(fn, actor=BOB, adapter_id=adapter)
            return
        assert self._call(fn, actor=BOB, adapter_id=adapter).state.value == target
        self.states[adapter] = target
        if target == "revoked" and adapter in self.library.values():
            self.library = {c: a for c, a in self.library.items() if a != adapter}
            self.history.append(dict(self.library))

    @rule(adapter=adapters_, stale=st.booleans())
    def promote(self, adapter: int, stale: bool) -> None:
        cap = self.caps[adapter]
        expected = len(self.history) - 1 if stale else len(self.history)
        request = channels.PromoteRequest(
            "prod", self.prepared.backbone, {cap: adapter}, None, expected, create=True
        )
        new = {**self.library, cap: adapter}
        if stale or self.states[adapter] != "approved" or new == self.library:
            with pytest.raises(RegistryError):
                self._call(channels.promote, actor=BOB, request=request)
            return
        result = self._call(channels.promote, actor=BOB, request=request)
        self.library = new
        self.history.append(dict(new))
        assert result.revision.revision == len(self.history)

    @rule(data=st.data())
    def rollback(self, data: st.DataObject) -> None:
        if len(self.history) < 2:
            return
        target = data.draw(st.integers(1, len(self.history) - 1))
        old = self.history[target - 1]
        try:
            self._call(channels.rollback, actor=BOB, channel="prod", to_revision=target)
        except (InvalidStateError, InvalidError):
            assert any(self.states[a] != "approved" for a in old.values())
            return
        self.library = dict(old)
        self.history.append(dict(old))

    @invariant()
    def channel_matches_model(self) -> None:
        with self.db.read() as session:
            if not self.history:
                return
            head = channels.get_revision(session=session, channel="prod")
            assert head.revision == len(self.history)
            assert {c: e.adapter_id for c, e in head.library.items()} == self.library
            assert all(self.states[e.adapter_id] == "approved" for e in head.library.values())
            numbers = [r.revision for r in channels.list_revisions(session=session, channel="prod")]
            assert numbers == list(range(1, len(self.history) + 1))
            assert events.verify(session=session).ok

    @invariant()
    def counts_match_the_versions(self) -> None:
        """The kept counts (capabilities page, /metrics) are the model's, and fsck agrees."""
        model: dict[str, dict[str, int]] = {}
        for adapter, state in self.states.items():
            per = model.setdefault(self.caps[adapter], {})
            per[state] = per.get(state, 0) + 1
        with self.db.read() as session:
            assert version_counts.counts(session=session) == model
            assert version_counts.kept(session=session) == version_counts.recount(session=session)


def test_lifecycle_and_revisions_follow_the_model(prepared: Prepared) -> None:
    Lifecycle.prepared = prepared
    run_state_machine_as_test(
        Lifecycle,
        settings=settings(
            max_examples=20,
            stateful_step_count=15,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
