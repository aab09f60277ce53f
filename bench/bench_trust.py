"""Signed trust latency (issue 28): what signing adds to a push and verification to a
node's revision install, per adapter, against a real `weact serve` on SQLite.

- sign: the publisher's side of a push, alone: the adapter's identity (its manifest root
  computed from the local weights) and one ed25519 DSSE signature;
- push: `push_adapter` of the same adapter bytes unsigned (development registry) and signed
  (strict registry: the server verifies the signature against its root), each pushing a
  new adapter per round; the difference is what signing costs end to end;
- verify: `runtime.trusted.verify_revision` of a 3-adapter revision as a node with a root
  and a state file runs it before an install (per adapter: one GET of its signatures, a
  publisher signature and a threshold of 2 approver signatures checked against the node's
  root; per revision: one GET of its signed TUF metadata, its 2 approver signatures, one
  GET of the registry's timestamp and its signature, the replay check and the state file
  written), divided by the adapters (target: under 50 ms per adapter); the revision-level
  part alone; and the adapter signature checks alone.

    PYTHONPATH=$PWD .venv/bin/python bench/bench_trust.py [--rounds 10]

Tiny adapters (runtime.tiny): signing does not read the weights beyond their safetensors
header and tensor digests, so the numbers hold for bigger ones plus their manifest time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from registry.client import RegistryClient
from registry.client.signing import pushed_identity
from registry.launcher import embedded_registry
from registry.trust import (
    PUBLISH,
    AdapterIdentity,
    TrustRoot,
    check_adapter,
    create_key,
    load_public_key,
    load_signer,
    sign_identity,
)
from registry.trust.channel import check_timestamp, verify_revision_metadata, verify_timestamp
from runtime.tiny import build_tiny_adapter, build_tiny_backbone
from runtime.trusted import TrustState, verify_revision
from storage.manifest import manifest_of_path

NAMES = ("admin", "pub", "ap1", "ap2")


def ms(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def make_root(keys: Path) -> Path:
    for name in NAMES:
        create_key(keys, name)
    public = {n: load_public_key(keys / f"{n}.pub.json") for n in NAMES}
    root = TrustRoot.create([public["admin"]], threshold=1)
    root.add_key("publish:*", public["pub"])
    root.add_key("approve:*", public["ap1"])
    root.add_key("approve:*", public["ap2"])
    root.set_threshold("approve:*", 2)
    root.sign(load_signer(keys / "admin.key"))
    root.save(keys / "root.json")
    return keys / "root.json"


def name_timestamp_key(root_path: Path, timestamp_pub: Path) -> TrustRoot:
    """The root, now naming the registry's timestamp key (made by `weact serve`)."""
    root = TrustRoot.load(root_path)
    root.add_key("timestamp", load_public_key(timestamp_pub))
    root.sign(load_signer(root_path.parent / "admin.key"))
    root.save(root_path)
    return TrustRoot.load(root_path)


def revision_level(client: RegistryClient, trust: TrustRoot, revision: Any) -> None:
    """The part of a node's check that is about the revision, not its adapters."""
    metadata = client.revision_metadata("prod", revision["revision"])
    verify_revision_metadata(trust, revision, metadata)
    check_timestamp(verify_timestamp(trust, "prod", client.channel_timestamp("prod")), revision)


def setup(server: Any, backbone: Path) -> tuple[RegistryClient, RegistryClient, str]:
    admin = RegistryClient(server.url, server.bootstrap_token("root", "admin"))
    pub = RegistryClient(server.url, server.bootstrap_token("alice", "publisher"))
    app = RegistryClient(server.url, server.bootstrap_token("bob", "approver"))
    root = admin.register_backbone(name="tiny", manifest=manifest_of_path(backbone).to_json())
    for name in ("plan", "search", "write"):
        admin.create_capability(name=name, description=name)
    admin.close()
    return pub, app, root["root"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-trust-"))
    backbone = build_tiny_backbone(work / "backbone")
    adapters = [
        build_tiny_adapter(backbone, work / f"a{i}", seed=i + 1) for i in range(args.rounds + 3)
    ]
    root_path = make_root(work / "keys")
    signer = load_signer(work / "keys" / "pub.key")
    results: dict[str, Any] = {"rounds": args.rounds}

    os.environ.pop("WEACT_STRICT", None)
    (work / "dev").mkdir()
    (work / "strict").mkdir()
    with contextlib.ExitStack() as stack:
        dev = stack.enter_context(embedded_registry(work / "dev"))
        os.environ.update(WEACT_STRICT="1", WEACT_TRUST_ROOT=str(root_path))
        strict = stack.enter_context(embedded_registry(work / "strict"))
        pub_dev, _, bb = setup(dev, backbone)
        pub, app, bb_strict = setup(strict, backbone)
        assert bb == bb_strict
        unsigned, signed = [], []
        for i in range(args.rounds):  # interleaved: the machine's load hits both alike
            unsigned.append(
                ms(lambda i=i: pub_dev.push_adapter(adapters[i], capability="write", backbone=bb))
            )
            signed.append(
                ms(
                    lambda i=i: pub.push_adapter(
                        adapters[i], capability="write", backbone=bb, signer=signer
                    )
                )
            )
        results["push_unsigned_ms"] = statistics.median(unsigned)
        results["push_signed_strict_ms"] = statistics.median(signed)
        files = {"adapter_config.json": "0" * 64}
        results["sign_ms"] = statistics.median(
            ms(
                lambda a=a: sign_identity(
                    pushed_identity(
                        pub, a, capability="write", backbone_root=bb, parent_id=None, files=files
                    ),
                    PUBLISH,
                    signer,
                )
            )
            for a in adapters[: args.rounds]
        )
        library = {}
        for capability, a in zip(("plan", "search", "write"), adapters[-3:], strict=True):
            pushed = pub.push_adapter(a, capability=capability, backbone=bb, signer=signer)
            for name in ("ap1", "ap2"):
                app.sign_approval(pushed["id"], load_signer(work / "keys" / f"{name}.key"))
            app.approve(pushed["id"])
            library[capability] = pushed["id"]
        approvers = [load_signer(work / "keys" / f"{name}.key") for name in ("ap1", "ap2")]
        revision = app.promote("prod", library, backbone=bb, create=True, signer=approvers[0])[
            "revision"
        ]
        app.sign_channel_revision("prod", revision["revision"], approvers[1])
        trust = name_timestamp_key(root_path, work / "strict" / ".weact" / "timestamp.pub.json")
        state = TrustState(work / "node" / "trust-state.json")
        per_revision = statistics.median(
            ms(lambda: verify_revision(app, revision, trust, state)) for _ in range(args.rounds)
        )
        results["verify_per_adapter_ms"] = per_revision / len(library)
        results["verify_revision_level_ms"] = statistics.median(
            ms(lambda: revision_level(app, trust, revision)) for _ in range(args.rounds)
        )
        envelopes = [s["envelope"] for s in app.list_signatures(library["write"])]
        entry = revision["library"]["write"]
        identity = AdapterIdentity(
            "write", entry["manifest_root"], bb, None, entry["files"]["adapter_config.json"]
        )
        results["verify_signatures_only_per_adapter_ms"] = statistics.median(
            ms(lambda: check_adapter(trust, identity, "prod", envelopes))
            for _ in range(args.rounds)
        )
        results["root_load_ms"] = statistics.median(
            ms(lambda: TrustRoot.load(root_path)) for _ in range(args.rounds)
        )
    results["push_added_ms"] = results["push_signed_strict_ms"] - results["push_unsigned_ms"]
    print(json.dumps({k: round(v, 2) for k, v in results.items()}, indent=2))
    verdict = "met" if results["verify_per_adapter_ms"] < 50 else "NOT met"
    print(f"node check per adapter per revision install: {results['verify_per_adapter_ms']:.1f} ms"
          f" (target < 50 ms: {verdict})")  # fmt: skip


if __name__ == "__main__":
    main()
