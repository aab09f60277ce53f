"""The insider of issue 28, measured: someone who holds only the registry's admin token mints
a publisher and an approver under new principals, pushes an attacker adapter signed with a
key of their own, approves and promotes it (the revision signed with that key too), all
through the API. How many seconds after the
promote's 2xx is it served, without a root of trust, and what does a root change?

Against a real `weact serve` (SQLite, local blobs, its online timestamp key named in the
root) with a signed `write` adapter on channel `prod` (the adapter and the revision signed by
the keys the root names, as `weact push --key` and `weact promote --key` do), per round:

- two real `weact runtime serve` nodes follow `prod` (long-poll 30 s), one without `--root`
  and one with: the seconds until the first's `/healthz` reports the attack's revision
  served, and until the second's reports it refused (`not trusted`), still serving the one
  before;
- the vLLM plugin's registry side (`runtime.vllm_resolver`: the resolver and the follower
  that runs inside vLLM's API server, here in this process, without vLLM), serving
  `prod/write`: without a root, the seconds until the follower drops the old binding and
  until `prod/write` resolves to the attacker's adapter, pulled and verified (loadable); with
  `WEACT_ROOT` (its `trust-state.json` in the library directory, as the plugin keeps it),
  until the revision is refused, `prod/write` still resolving to the signed one.

Then a signed promote puts a good adapter back for the next round.

    PYTHONPATH=$PWD .venv/bin/python bench/bench_insider.py [--rounds 3]

Tiny adapters (runtime.tiny): the times are the follow path's, not a download's.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx

from registry.client import RegistryClient
from registry.launcher import (
    EmbeddedRegistry,
    child_process,
    embedded_registry,
    free_port,
    wait_until_healthy,
    weact_command,
)
from registry.trust import TrustRoot, create_key, load_public_key, load_signer
from runtime.tiny import build_tiny_adapter, build_tiny_backbone
from runtime.trusted import STATE_FILE, TrustState
from runtime.vllm_resolver.follower import ServedFollower
from runtime.vllm_resolver.policy import ServedName
from runtime.vllm_resolver.served import ServedTable
from runtime.vllm_resolver.source import RegistrySource
from runtime.vllm_resolver.trust import Trust
from storage.manifest import manifest_of_path

NODE_TOKEN = "bench-node-client"
TIMEOUT_S = 60.0


def until(check: Callable[[], bool], every: float = 0.01) -> float:
    """Monotonic time at which `check()` first held (polled every `every` s)."""
    return first_times({"": check}, every)[""]


def first_times(checks: Mapping[str, Callable[[], bool]], every: float = 0.005) -> dict[str, float]:
    """Name -> monotonic time its check first held; each polled by a thread of its own."""
    seen: dict[str, float] = {}

    def poll(name: str, check: Callable[[], bool]) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            if check():
                seen[name] = time.monotonic()
                return
            time.sleep(every)

    threads = [threading.Thread(target=poll, args=item) for item in checks.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if missing := sorted(set(checks) - set(seen)):
        raise TimeoutError(f"not met in {TIMEOUT_S} s: {missing}")
    return seen


def make_root(keys: Path, timestamp: Path) -> Path:
    """admin signs; pub publishes; app approves prod (adapters and revisions); the registry's
    timestamp key (`timestamp`, its public key file)."""
    public = {n: load_public_key(create_key(keys, n)[1]) for n in ("admin", "pub", "app", "evil")}
    root = TrustRoot.create([public["admin"]], threshold=1)
    root.add_key("publish:*", public["pub"])
    root.add_key("approve:prod", public["app"])
    root.add_key("timestamp", load_public_key(timestamp))
    root.sign(load_signer(keys / "admin.key"))
    root.save(keys / "root.json")
    return keys / "root.json"


@contextlib.contextmanager
def node(
    work: Path, backbone: Path, registry: EmbeddedRegistry, token: str, root: Path | None
) -> Iterator[str]:
    """A `weact runtime serve` following prod; yields its URL."""
    name = "node-root" if root else "node-plain"
    port, library = free_port(), work / name / "library"
    argv = weact_command() + [
        "runtime", "serve", "--backbone", str(backbone), "--policy", "soft", "--no-kb",
        "--registry", registry.url, "--registry-token", token, "--channel", "prod",
        "--node-id", name, "--library-dir", str(library), "--token", NODE_TOKEN,
        "--port", str(port), "--heartbeat", "5", "--poll-wait", "30",
    ]  # fmt: skip
    argv += ["--root", str(root)] if root else []
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEACT_")}
    (work / name).mkdir(parents=True, exist_ok=True)
    url = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {NODE_TOKEN}"}
    with child_process(argv, work / name / "node.log", cwd=work / name, env=env) as process:
        wait_until_healthy(f"{url}/healthz", process, work / name / "node.log", 120,
                           what=name, headers=headers)  # fmt: skip
        yield url


def serves(url: str, revision: int) -> bool:
    return int(library(url)["revision"]) == revision


def library(url: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {NODE_TOKEN}"}
    return dict(httpx.get(f"{url}/healthz", headers=headers, timeout=10).json()["library"])


class Plugin:
    """The vLLM plugin's registry side serving prod/write, with or without a root."""

    def __init__(
        self, client: RegistryClient, backbone: Path, dest: Path, root: TrustRoot | None
    ) -> None:
        self.client, self.backbone = client, str(backbone)
        state = TrustState.load(dest / STATE_FILE) if root is not None else None
        self.trust = Trust(lambda: client, root, "prod", state)  # as the plugin's entry point
        self.source = RegistrySource(client, dest, trust=self.trust)
        self.table = ServedTable()
        self.dropped: list[float] = []
        self.follower = ServedFollower(
            lambda: client, self.table, self._drop, mode="no", library_dir=dest,
            node_id=f"bench-vllm-{'root' if root else 'plain'}", channel="prod",
            wait_s=30, heartbeat_s=60, trust=self.trust,
        )  # fmt: skip

    def _drop(self, bindings: Mapping[str, ServedName]) -> None:
        self.dropped.append(time.monotonic())

    def serve(self) -> str:
        """Resolve prod/write as vLLM's resolver does (the name re-bound); its version."""
        binding = self.source.resolve(self.backbone, "prod/write")[0]
        self.table.add(binding)
        return binding.version


class Bench:
    """The registry, its principals and the signing keys of one run."""

    def __init__(
        self, registry: EmbeddedRegistry, registry_dir: Path, work: Path, backbone: Path
    ) -> None:
        self.registry, self.work, self.backbone = registry, work, backbone
        self.keys = work / "keys"
        # `weact serve` made its timestamp key beside the blob directory
        self.root_path = make_root(self.keys, registry_dir / ".weact" / "timestamp.pub.json")
        self.admin = RegistryClient(registry.url, registry.bootstrap_token("root", "admin"))
        self.pub, self.app = (self.minted(r, r) for r in ("publisher", "approver"))
        manifest = manifest_of_path(backbone).to_json()
        self.backbone_root = self.admin.register_backbone(name="tiny", manifest=manifest)["root"]
        self.admin.create_capability(name="write", description="write it.")
        self.seeds = iter(range(100, 10_000))

    def minted(self, name: str, role: str) -> RegistryClient:
        token = self.admin.create_token(name=name, role=role)["token"]
        return RegistryClient(self.registry.url, token)

    def adapter(self, pub: RegistryClient, app: RegistryClient, pub_key: str, app_key: str) -> int:
        """A new tiny `write` adapter pushed by `pub`, signed and approved by `app`."""
        seed = next(self.seeds)
        path = build_tiny_adapter(self.backbone, self.work / "adapters" / str(seed), seed=seed)
        signer = load_signer(self.keys / f"{pub_key}.key")
        pushed = pub.push_adapter(
            path, capability="write", backbone=self.backbone_root, signer=signer
        )
        app.sign_approval(pushed["id"], load_signer(self.keys / f"{app_key}.key"))
        app.approve(pushed["id"])
        return int(pushed["id"])

    def promote(self, client: RegistryClient, adapter_id: int, key: str) -> int:
        """A revision serving `adapter_id` as `write`, signed by `key` (`weact promote --key`)."""
        done = client.promote(
            "prod", {"write": adapter_id}, backbone=self.backbone_root, create=True,
            signer=load_signer(self.keys / f"{key}.key"),
        )  # fmt: skip
        return int(done["revision"]["revision"])


def attack_round(
    bench: Bench, round_: int, nodes: tuple[str, str], plugins: tuple[Plugin, Plugin]
) -> dict[str, float]:
    """One insider attack: event -> seconds after the promote's 2xx."""
    (plain_node, root_node), (plain, rooted) = nodes, plugins
    # the insider: only the admin token; new principals, a key of their own
    with (
        bench.minted(f"mallory-{round_}-publisher", "publisher") as pub,
        bench.minted(f"mallory-{round_}-approver", "approver") as app,
    ):
        evil = bench.adapter(pub, app, "evil", "evil")
        name = bench.admin.get_adapter(evil)["name"]
        before = int(library(root_node)["revision"])
        plain.dropped.clear()
        attack = bench.promote(app, evil, "evil")  # signed, by a key no root names
        t0 = time.monotonic()
    # vLLM asks the resolver again only once the follower dropped the name it had bound
    at = first_times(
        {
            "node without --root: served s": lambda: library(plain_node)["revision"] == attack,
            "node with --root: refused s": lambda: "not trusted" in library(root_node)["detail"],
            "vLLM plugin without WEACT_ROOT: binding dropped s": lambda: bool(plain.dropped),
            "vLLM plugin without WEACT_ROOT: loadable s": (
                lambda: bool(plain.dropped) and plain.serve() == name
            ),
            "vLLM plugin with WEACT_ROOT: refused s": lambda: "prod" in rooted.trust.refusals(),
        }
    )
    at["vLLM plugin without WEACT_ROOT: binding dropped s"] = plain.dropped[0]  # exact
    assert library(root_node)["revision"] == before, "the rooted node moved"
    assert rooted.serve() != name, "the rooted plugin serves the insider's adapter"
    assert not rooted.dropped, "the rooted plugin moved prod/write"
    return {key: round(when - t0, 3) for key, when in at.items()}


def restore(bench: Bench, nodes: tuple[str, str], plugins: tuple[Plugin, Plugin]) -> None:
    """A signed promote: every follower on it again, prod/write bound to it."""
    good = bench.promote(bench.app, bench.adapter(bench.pub, bench.app, "pub", "app"), "app")
    first_times({url: functools.partial(serves, url, good) for url in nodes})
    until(lambda: "prod" not in plugins[1].trust.refusals())
    for plugin in plugins:
        plugin.serve()
        plugin.dropped.clear()
    time.sleep(0.5)  # every long-poll is waiting again


def measure(rounds: int, work: Path) -> dict[str, list[float]]:
    backbone = build_tiny_backbone(work / "backbone")
    out: dict[str, list[float]] = {}
    (work / "registry").mkdir()
    with embedded_registry(work / "registry") as registry:
        bench = Bench(registry, work / "registry", work, backbone)
        bench.promote(bench.app, bench.adapter(bench.pub, bench.app, "pub", "app"), "app")
        token = [bench.admin.create_token(name=f"node{i}", role="node")["token"] for i in range(4)]
        clients = [RegistryClient(registry.url, t) for t in token[2:]]  # a node id per token
        root = TrustRoot.load(bench.root_path)
        plugins = (
            Plugin(clients[0], backbone, work / "vllm-plain", None),
            Plugin(clients[1], backbone, work / "vllm-root", root),
        )
        with (
            node(work, backbone, registry, token[0], None) as plain_node,
            node(work, backbone, registry, token[1], bench.root_path) as root_node,
        ):
            for plugin in plugins:
                plugin.serve()
                plugin.follower.start()
            time.sleep(1.0)  # every long-poll is waiting
            for round_ in range(rounds):
                times = attack_round(bench, round_, (plain_node, root_node), plugins)
                print(json.dumps({"round": round_, **times}))  # noqa: T201
                for key, seconds in times.items():
                    out.setdefault(key, []).append(seconds)
                restore(bench, (plain_node, root_node), plugins)
            for plugin in plugins:
                plugin.follower.stop()
        for client in (bench.admin, bench.pub, bench.app, *clients):
            client.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-insider-") as tmp:
        out = measure(args.rounds, Path(tmp))
    summary = {k: {"median": statistics.median(v), "max": max(v), "all": v} for k, v in out.items()}
    print(json.dumps(summary, indent=2))  # noqa: T201


if __name__ == "__main__":
    main()
