"""The vLLM plugin with a root of trust (`WEACT_ROOT`), without vLLM: a real `weact serve`
over HTTP (its timestamp key named in the root, revisions signed by two approvers as
`weact promote --key` does: tests/support/signed_world.py), its database and blob store
written directly by an attacker, and the plugin's own resolver, follower and load check
(issue 28).

The registry breached: an attacker adapter registered through the registry's own services
(no API, no auth), marked approved with correct digests, signature rows claiming the
trusted keys' ids (signed by the attacker's key), and set as the channel head. A plugin
without a root makes it loadable; with the root the revision is refused, the channel name
keeps its last verified version, the heartbeat says why, and a signed promote is followed.
A replayed older revision (properly signed, listing a since-revoked adapter) is refused, also
by a restarted plugin (its `trust-state.json`); a registry that stops renewing its timestamp
(a freeze) makes the plugin's heartbeat `stale`, with the reason.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

pytest.importorskip("safetensors")

from support.signed_world import (  # noqa: E402
    TIMESTAMP_EXPIRY_S,
    BreachedClient,
    World,
    breach,
    eventually,
)

from registry.client import Adapter, RegistryClient  # noqa: E402
from registry.trust import (  # noqa: E402
    TrustRoot,
)
from registry.trust.channel import freshness_required  # noqa: E402
from runtime.tiny import build_tiny_adapter  # noqa: E402
from runtime.trusted import STATE_FILE, TrustState  # noqa: E402
from runtime.vllm_resolver.follower import ServedFollower  # noqa: E402
from runtime.vllm_resolver.integrity import IntegrityRefused, LoadVerifier  # noqa: E402
from runtime.vllm_resolver.policy import ServedName  # noqa: E402
from runtime.vllm_resolver.served import ServedTable  # noqa: E402
from runtime.vllm_resolver.settings import PluginSettings  # noqa: E402
from runtime.vllm_resolver.source import RegistrySource, ResolveRefused  # noqa: E402
from runtime.vllm_resolver.trust import Trust  # noqa: E402
from storage.manifest import manifest_of_file  # noqa: E402

WEIGHTS = "adapter_model.safetensors"
CONFIG = "adapter_config.json"


@pytest.fixture(scope="module")
def signed_database() -> None:
    """`signed_world` on SQLite alone: what the plugin checks does not depend on the database."""
    return None


@pytest.fixture
def root(signed_world: World) -> TrustRoot:
    return TrustRoot.load(signed_world.root_path)


def publish(signed_world: World, backbone: Path, tmp_path: Path, seed: int) -> Adapter:
    """A new tiny `write` adapter signed by the publisher and two approvers, approved."""
    directory = build_tiny_adapter(backbone, tmp_path / f"write{seed}", seed=seed)
    adapter: Adapter = signed_world.admin.get_adapter(
        signed_world.publish(directory, "write", ("approver1", "approver2"))
    )
    return adapter


def node_detail(signed_world: World, node_id: str) -> str:
    return str(signed_world.node_row(node_id)["audit"]["detail"])


def plugin_follower(
    client: RegistryClient, library: Path, node_id: str, trust: Trust
) -> ServedFollower:
    """The plugin's follower of prod (no candidates; what it would drop is not kept), quick:
    a state check every 0.2 s, a heartbeat every 0.3 s."""
    return ServedFollower(
        lambda: client, ServedTable(), lambda bindings: None, mode="no", library_dir=library,
        node_id=node_id, channel="prod", check_s=0.2, wait_s=1, heartbeat_s=0.3, trust=trust,
    )  # fmt: skip


def test_a_breached_registrys_head_is_refused_and_the_last_verified_keeps_serving(
    signed_world: World, root: TrustRoot, tiny_backbone: Path, tmp_path: Path
) -> None:
    good = publish(signed_world, tiny_backbone, tmp_path, 11)
    signed_world.promote("prod", {"write": good["id"]})
    node, base = signed_world.node(), str(tiny_backbone)
    trust = Trust(lambda: node, root, "prod")
    source, table = RegistrySource(node, tmp_path / "signed", trust=trust), ServedTable()
    table.add(source.resolve(base, "prod/write")[0])
    assert source.resolve(base, good["name"])[0].version == good["name"]  # signed: served
    dropped: list[Mapping[str, ServedName]] = []
    follower = ServedFollower(
        lambda: node, table, dropped.append, mode="no", library_dir=tmp_path / "signed",
        node_id="vllm-rooted", channel="prod", check_s=0.2, wait_s=5, heartbeat_s=60,
        trust=trust,
    )  # fmt: skip
    follower.start()
    try:
        time.sleep(0.5)  # the long-poll is waiting
        evil_id, evil_root, attack = breach(signed_world, tiny_backbone, tmp_path, 77)
        eventually(lambda: "prod" in trust.refusals())
        eventually(lambda: "not trusted" in node_detail(signed_world, "vllm-rooted"))
        assert f"prod revision {attack}" in trust.refusals()["prod"]
        assert "0 of 1 publish signature(s)" in trust.refusals()["prod"]
        time.sleep(0.5)  # a few state checks: nothing moves
        assert dropped == []
        assert set(table.snapshot()) == {"prod/write"}
        binding, path = source.resolve(base, "prod/write")  # a fresh resolve: the last verified
        assert binding.version == good["name"]
        assert manifest_of_file(path / WEIGHTS).root == good["manifest_root"]
        evil = node.get_adapter(evil_id)
        with pytest.raises(ResolveRefused, match="not signed as an adapter of channel 'prod'"):
            source.resolve(base, evil["name"])
        assert not (tmp_path / "signed" / evil["name"]).exists()
        with pytest.raises(ResolveRefused, match="serves channel 'prod' .*not 'staging'"):
            source.resolve(base, "staging/write")
        verifier = LoadVerifier(lambda: node, tmp_path / "signed", "vllm-rooted", trust=trust)
        with pytest.raises(IntegrityRefused, match="0 of 1 publish"):
            verifier.expected(evil["name"])

        # without a root the same registry is believed: the attack works there
        plain = RegistrySource(node, tmp_path / "plain")
        binding, path = plain.resolve(base, "prod/write")
        assert binding.version == evil["name"]
        assert manifest_of_file(path / WEIGHTS).root == evil_root

        better = publish(signed_world, tiny_backbone, tmp_path, 12)  # a signed promote: followed
        signed_world.promote("prod", {"write": better["id"]})
        eventually(lambda: bool(dropped))
        assert set(dropped[0]) == {"prod/write"}
        assert trust.refusals() == {}
        assert source.resolve(base, "prod/write")[0].version == better["name"]
        follower.heartbeat()
        assert "refused" not in node_detail(signed_world, "vllm-rooted")
    finally:
        follower.stop()
        node.close()


def test_a_channel_never_verified_is_refused(
    signed_world: World, root: TrustRoot, tiny_backbone: Path, tmp_path: Path
) -> None:
    signed_world.promote("prod", signed_world.adapters)  # prod exists, run alone or first
    node = signed_world.node()
    try:
        breach(signed_world, tiny_backbone, tmp_path, 78)  # prod's head, and nothing verified here
        source = RegistrySource(node, tmp_path / "lib", trust=Trust(lambda: node, root))
        with pytest.raises(ResolveRefused, match="not trusted.*0 of 1 publish"):
            source.resolve(str(tiny_backbone), "prod/write")
        assert not (tmp_path / "lib").exists()
    finally:
        node.close()


def test_a_replayed_older_revision_is_refused_also_after_a_restart(
    signed_world: World, root: TrustRoot, tiny_backbone: Path, tmp_path: Path
) -> None:
    library, base = tmp_path / "lib", str(tiny_backbone)
    leaked = publish(signed_world, tiny_backbone, tmp_path, 21)
    old = signed_world.promote("prod", {"write": leaked["id"]})
    client = signed_world.breached_node()
    trust = Trust(lambda: client, root, "prod", TrustState.load(library / STATE_FILE))
    source = RegistrySource(client, library, trust=trust)
    assert source.resolve(base, "prod/write")[0].version == leaked["name"]
    good = publish(signed_world, tiny_backbone, tmp_path, 22)
    new = signed_world.promote("prod", {"write": good["id"]})  # the leaked adapter leaves prod
    signed_world.bob.revoke(leaked["id"], "weights leaked")
    assert source.resolve(base, "prod/write")[0].revision == new
    saved = json.loads((library / STATE_FILE).read_text())
    assert saved["channels"]["prod"]["revision"] == new

    client.replay = signed_world.admin.channel_revision("prod", old)  # its signatures all valid
    binding, path = source.resolve(base, "prod/write")
    assert (binding.version, binding.revision) == (good["name"], new)  # the last verified
    assert manifest_of_file(path / WEIGHTS).root == good["manifest_root"]
    assert f"prod revision {old} is older than revision {new}" in trust.refusals()["prod"]
    follower = plugin_follower(client, library, "vllm-replayed", trust)
    follower.heartbeat()
    assert "older than revision" in node_detail(signed_world, "vllm-replayed")

    # a restart: a new process, the same library directory (its trust-state.json)
    again = BreachedClient(
        signed_world.server.url, signed_world.admin.create_token(name="vllm", role="node")["token"]
    )
    again.replay = client.replay
    restarted = Trust(lambda: again, root, "prod", TrustState.load(library / STATE_FILE))
    try:
        with pytest.raises(ResolveRefused, match=f"older than revision {new}"):
            RegistrySource(again, library, trust=restarted).resolve(base, "prod/write")
        assert restarted.refusals()["prod"].startswith(f"prod revision {old} is older")
        again.replay = None  # the registry honest again: the signed head is served
        assert (
            RegistrySource(again, library, trust=restarted).resolve(base, "prod/write")[0].version
            == good["name"]
        )
    finally:
        client.close()
        again.close()


def test_a_frozen_registry_makes_the_heartbeat_stale(
    signed_world: World, root: TrustRoot, tmp_path: Path
) -> None:
    assert freshness_required(root)  # the root names the registry's timestamp key
    client = signed_world.breached_node()
    trust = Trust(lambda: client, root, "prod", TrustState.load(tmp_path / STATE_FILE))
    follower = plugin_follower(client, tmp_path, "vllm-frozen", trust)
    follower.start()
    try:
        eventually(lambda: "vllm-frozen" in {n["id"] for n in signed_world.admin.list_nodes()})
        assert trust.frozen() == ""
        assert signed_world.node_row("vllm-frozen")["stale"] is False

        client.frozen = client.channel_timestamp("prod")  # no new timestamp from now on
        eventually(lambda: signed_world.node_row("vllm-frozen")["stale"], TIMESTAMP_EXPIRY_S + 10)
        detail = node_detail(signed_world, "vllm-frozen")
        stale = detail.partition("; stale: ")[2]
        assert "expired" in stale, detail
        assert "expired" in trust.frozen()

        client.frozen = None  # the registry signs again
        eventually(lambda: not signed_world.node_row("vllm-frozen")["stale"])
        assert "stale" not in node_detail(signed_world, "vllm-frozen")
    finally:
        follower.stop()
        client.close()


def test_a_revision_heard_before_its_approvers_signed_is_followed_once_they_do(
    signed_world: World, root: TrustRoot, tiny_backbone: Path, tmp_path: Path
) -> None:
    first = publish(signed_world, tiny_backbone, tmp_path, 31)
    signed_world.promote("prod", {"write": first["id"]})
    node, base = signed_world.node(), str(tiny_backbone)
    trust = Trust(lambda: node, root, "prod", TrustState.load(tmp_path / STATE_FILE))
    source, table = RegistrySource(node, tmp_path, trust=trust), ServedTable()
    table.add(source.resolve(base, "prod/write")[0])
    dropped: list[Mapping[str, ServedName]] = []
    follower = ServedFollower(
        lambda: node, table, dropped.append, mode="no", library_dir=tmp_path,
        node_id="vllm-cosigned", channel="prod", check_s=0.2, wait_s=5, heartbeat_s=60,
        trust=trust,
    )  # fmt: skip
    follower.start()
    try:
        time.sleep(0.5)  # the long-poll is waiting
        second = publish(signed_world, tiny_backbone, tmp_path, 32)
        promoted = signed_world.bob.promote("prod", {"write": second["id"]})  # no key yet
        number = int(promoted["revision"]["revision"])
        eventually(lambda: "0 of 2 approver signature(s)" in trust.refusals().get("prod", ""))
        signed_world.bob.sign_channel_revision("prod", number, signed_world.signer("approver1"))
        # verified again after a backoff: one of two is not enough
        eventually(lambda: "1 of 2 approver signature(s)" in trust.refusals()["prod"])
        assert dropped == []
        signed_world.carol.sign_channel_revision("prod", number, signed_world.signer("approver2"))
        eventually(lambda: bool(dropped))  # the follower's recheck (backoff: 0.5 s, 1 s, ...)
        assert trust.refusals() == {}
        assert source.resolve(base, "prod/write")[0].version == second["name"]
        eventually(lambda: "refused" not in node_detail(signed_world, "vllm-cosigned"))
    finally:
        follower.stop()
        node.close()


def test_the_root_setting(
    signed_world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WEACT_VLLM_ROOT", raising=False)
    monkeypatch.delenv("WEACT_ROOT", raising=False)
    assert PluginSettings().trust_root() is None  # no root: the registry's word, as before
    monkeypatch.setenv("WEACT_ROOT", str(signed_world.root_path))
    loaded = PluginSettings().trust_root()
    assert loaded is not None
    assert loaded.version == TrustRoot.load(signed_world.root_path).version
    unsigned = tmp_path / "root.json"
    TrustRoot.create([signed_world.public("admin1")], threshold=1).save(unsigned)
    monkeypatch.setenv("WEACT_VLLM_ROOT", str(unsigned))  # the plugin's own wins
    with pytest.raises(SystemExit, match="refusing to start: root of trust .*WEACT_ROOT"):
        PluginSettings().trust_root()
    monkeypatch.setenv("WEACT_VLLM_ROOT", str(tmp_path / "missing.json"))
    with pytest.raises(SystemExit, match="missing.json"):
        PluginSettings().trust_root()
