"""A stock vLLM OpenAI server with the registry plugin, driven as an operator would.

A real `weact serve` (SQLite, local blobs) holds SmolLM2 as backbone, plan@1, write@1
(promoted to channel prod), write@2 (approved, other weights) and write@3 (pushed, never
approved); every revision of prod is signed by the approver key (`weact promote --key`).
A real `python -m vllm.entrypoints.openai.api_server` with runtime LoRA updating,
`--api-key`, one LoRA slot and one CPU LoRA slot (so any other adapter evicts the one
before) and only this project's resolver plugin is driven through the official `openai`
client. The server has a root of trust (`WEACT_ROOT`): every adapter above is signed by a
publisher key and an approver key it names, and an insider's adapter (signed by keys of
their own, approved and promoted through the API) is refused. One server start serves every
check but the last two (a start refused in seconds, and a second server in evaluation mode,
without a root); they run in file order.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from vllm_support import build_adapters, wait_healthy

from registry.client import RegistryClient
from registry.launcher import EmbeddedRegistry, embedded_registry, free_port, weact_command
from registry.trust import TrustRoot, create_key, load_public_key, load_signer
from storage.manifest import manifest_of_file, manifest_of_path

pytestmark = pytest.mark.vllm

WEIGHTS = "adapter_model.safetensors"
API_KEY = "operator-key"
NODE_ID = "vllm-test"
PROMPT = [1, 9690, 314, 260, 3575, 282, 4649, 47, 198]  # token ids, any will do
SLO_S = 2.0


@dataclass
class World:
    registry: EmbeddedRegistry
    admin: RegistryClient
    approver: RegistryClient
    node_token: str
    adapters: dict[str, dict[str, Any]]
    backbone: Path
    workdir: Path
    keys: Path  # admin, publisher, approver (named by root.json), mallory (not)
    timings: dict[str, float] = field(default_factory=dict)

    def signer(self, name: str) -> Any:
        return load_signer(self.keys / f"{name}.key")


def make_keys(keys: Path, timestamp: Path) -> Path:
    """Keys and a root of trust: publisher for every capability, one approver for prod (its
    adapters and revisions), the registry's timestamp key (`timestamp`, its public key)."""
    public = {n: load_public_key(create_key(keys, n)[1]) for n in ("admin", "publisher",
              "approver", "mallory")}  # fmt: skip
    root = TrustRoot.create([public["admin"]], threshold=1)
    root.add_key("publish:*", public["publisher"])
    root.add_key("approve:prod", public["approver"])
    root.add_key("timestamp", load_public_key(timestamp))
    root.sign(load_signer(keys / "admin.key"))
    root.save(keys / "root.json")
    return keys


@dataclass
class Server:
    url: str
    library: Path
    log: Path
    process: subprocess.Popen[bytes]
    client: openai.OpenAI

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def complete(self, model: str, max_tokens: int = 8) -> Any:
        return self.client.completions.create(
            model=model, prompt=PROMPT, max_tokens=max_tokens, temperature=0,
            extra_body={"ignore_eos": True, "return_token_ids": True},
        )  # fmt: skip

    def tokens(self, model: str) -> tuple[str, list[int]]:
        """(the version that answered, its greedy tokens)."""
        response = self.complete(model)
        return response.model, list(response.choices[0].model_extra["token_ids"])

    def served_names(self) -> set[str]:
        """The LoRAs vLLM lists: the version each served name is bound to."""
        return {m.id for m in self.client.models.list().data}

    def post(self, path: str, body: dict[str, Any], key: str | None = API_KEY) -> httpx.Response:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.post(f"{self.url}{path}", json=body, headers=headers, timeout=60)


@pytest.fixture(scope="module")
def world(
    no_inprocess_vllm: None,
    smollm2: Path,
    adapter_dir: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[World]:
    workdir = tmp_path_factory.mktemp("resolver")
    candidate = build_adapters(smollm2, workdir / "candidate", {"write@3": 4})["write@3"]
    with embedded_registry(workdir) as registry:
        # the root names the timestamp key `weact serve` made beside its blob directory
        keys = make_keys(workdir / "keys", workdir / ".weact" / "timestamp.pub.json")
        publisher, approver = (load_signer(keys / f"{n}.key") for n in ("publisher", "approver"))
        admin = RegistryClient(registry.url, registry.bootstrap_token("a", "admin"))
        token = {
            role: admin.create_token(name=role, role=role)["token"]
            for role in ("publisher", "approver", "node")
        }
        alice = RegistryClient(registry.url, token["publisher"])
        bob = RegistryClient(registry.url, token["approver"])
        root = admin.register_backbone(name="smollm2", manifest=manifest_of_path(smollm2).to_json())
        for order, name in enumerate(("plan", "write")):
            admin.create_capability(name=name, description=f"{name} phase", order=order)
        adapters = {}
        for version, path in [*adapter_dir.items(), ("write@3", candidate)]:
            pushed = alice.push_adapter(
                path, capability=version.split("@")[0], backbone=root["root"], signer=publisher
            )
            assert pushed["name"] == version
            if version != "write@3":
                bob.sign_approval(pushed["id"], approver)
            adapters[version] = pushed if version == "write@3" else bob.approve(pushed["id"])
        ids = {"plan": adapters["plan@1"]["id"], "write": adapters["write@1"]["id"]}
        bob.promote("prod", ids, backbone=root["root"], order=["plan", "write"], create=True,
                    signer=approver)  # fmt: skip
        world = World(registry, admin, bob, token["node"], adapters, smollm2, workdir, keys)
        yield world
        print("\nmeasured:", json.dumps(world.timings))  # noqa: T201 (the numbers the issue asks for)
        for client in (admin, alice, bob):
            client.close()


def server_env(world: World, library: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "true",
        "VLLM_PLUGINS": "weact_registry",
        "VLLM_LOGGING_LEVEL": "INFO",
        "WEACT_VLLM_REGISTRY_URL": world.registry.url,
        "WEACT_VLLM_REGISTRY_TOKEN": world.node_token,
        "WEACT_VLLM_LIBRARY_DIR": str(library),
        "WEACT_VLLM_NODE_ID": NODE_ID,
        "WEACT_VLLM_HEARTBEAT_S": "1",
        **extra,
    }


def server_argv(world: World, port: int, *, api_key: bool = True) -> list[str]:
    argv = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(world.backbone),
        "--host", "127.0.0.1", "--port", str(port), "--enable-lora", "--max-loras", "1",
        "--max-cpu-loras", "1", "--max-lora-rank", "8", "--dtype", "float32",
        "--max-model-len", "1024", "--block-size", "32", "--kv-cache-memory-bytes",
        str(128 * 2**20),
    ]  # fmt: skip
    return argv + (["--api-key", API_KEY] if api_key else [])


def start_server(world: World, name: str, **extra: str) -> Server:
    library, log, port = (
        world.workdir / f"{name}-library",
        world.workdir / f"{name}.log",
        free_port(),
    )
    with open(log, "wb") as out:
        process = subprocess.Popen(
            server_argv(world, port), env=server_env(world, library, **extra),
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    server = Server(
        url, library, log, process, openai.OpenAI(base_url=f"{url}/v1", api_key=API_KEY)
    )
    try:
        wait_healthy(url, process, log)
    except BaseException:
        server.stop()
        raise
    return server


@pytest.fixture(scope="module")
def server(world: World) -> Iterator[Server]:
    started = start_server(world, "default", WEACT_ROOT=str(world.keys / "root.json"))
    yield started
    started.stop()


def until(check: Callable[[], bool], timeout: float = 20.0, every: float = 0.02) -> float:
    """Seconds until `check()` held (polled), or fail."""
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < timeout, "condition not met in time"
        time.sleep(every)
    return time.monotonic() - start


def refused(server: Server, model: str) -> bool:
    try:
        server.complete(model, max_tokens=1)
    except openai.NotFoundError:
        return True
    return False


def events(world: World, action: str) -> list[dict[str, Any]]:
    return [e for e in world.admin.list_events(limit=1000) if e["action"] == action]


def test_names_resolve_to_verified_approved_versions_and_candidates_are_404(
    world: World, server: Server
) -> None:
    version, by_channel = server.tokens("prod/plan")
    assert (version, by_channel) == server.tokens("plan@1")
    assert version == "plan@1"
    assert server.tokens("write@1")[1] != by_channel
    for model in ("write@3", "write@9", "nochannel/plan"):
        with pytest.raises(openai.NotFoundError):
            server.complete(model)
    assert not (server.library / "write@3").exists()
    refusal = next(line for line in server.log.read_text().splitlines() if "'write@3'" in line)
    assert "refusing" in refusal
    assert "evaluation" in refusal
    assert re.match(r"^\(APIServer pid=\d+\) ERROR .*\[server\.py:\d+\] refusing", refusal)
    pulled = server.library / "plan@1" / WEIGHTS
    assert manifest_of_file(pulled).root == world.adapters["plan@1"]["manifest_root"]


def test_load_lora_adapter_cannot_squat_registry_names(world: World, server: Server) -> None:
    foreign = str(world.workdir / "candidate" / "write-3")
    for name, path in (("prod/write", foreign), ("write@2", foreign),
                       ("innocent", str(server.library / "plan@1"))):  # fmt: skip
        answer = server.post("/v1/load_lora_adapter", {"lora_name": name, "lora_path": path})
        assert answer.status_code == 403, (name, answer.text)
    no_key = server.post("/v1/load_lora_adapter", {"lora_name": "x", "lora_path": foreign}, None)
    assert no_key.status_code == 401
    assert "innocent" not in server.served_names()


def test_tampered_weights_never_answer_after_an_eviction(world: World, server: Server) -> None:
    assert server.tokens("write@2")[0] == "write@2"
    honest = server.tokens("write@2")[1]
    cached = server.library / "write@2" / WEIGHTS
    shutil.copyfile(server.library / "write@1" / WEIGHTS, cached)  # other, valid weights
    assert server.tokens("plan@1")[0] == "plan@1"  # evicts write@2 (one CPU LoRA slot)
    assert server.tokens("write@1")[0] == "write@1"
    assert server.tokens("write@2") == ("write@2", honest)  # reloaded: refused, re-pulled
    log = server.log.read_text().splitlines()
    refusal = next(line for line in log if "refusing weights of write@2" in line)
    assert re.match(r"^\((EngineCore|Worker)\S* pid=\d+\) ERROR .*\[integrity\.py:\d+\]", refusal)
    assert manifest_of_file(cached).root == world.adapters["write@2"]["manifest_root"]
    reported = events(world, "node.integrity.refused")
    assert [e["payload"]["adapter"] for e in reported] == ["write@2"]
    assert reported[0]["subject"] == f"node:{NODE_ID}"


def test_promote_and_rollback_repoint_the_channel_name(world: World, server: Server) -> None:
    assert server.tokens("prod/write")[0] == "write@1"
    root = world.adapters["write@1"]["backbone"]
    for target in ("write@2", "write@1"):
        if target == "write@2":
            ids = {"plan": world.adapters["plan@1"]["id"], "write": world.adapters["write@2"]["id"]}
            world.approver.promote("prod", ids, backbone=root, order=["plan", "write"],
                                   signer=world.signer("approver"))  # fmt: skip
        else:  # write@1 again
            world.approver.rollback("prod", to_revision=1, signer=world.signer("approver"))
        start = time.monotonic()
        until(lambda t=target: server.complete("prod/write", max_tokens=1).model == t, every=0.05)
        world.timings[f"promote-to-serve {target} s"] = served = time.monotonic() - start
        assert served < SLO_S, served


def test_revoke_stops_the_version_and_channel_names_and_in_flight_finishes(
    world: World, server: Server
) -> None:
    assert server.tokens("write@1")[0] == "write@1"
    assert server.tokens("prod/write")[0] == "write@1"
    stream = server.client.completions.create(
        model="write@1", prompt=PROMPT, max_tokens=48, temperature=0, stream=True,
        extra_body={"ignore_eos": True},
    )  # fmt: skip
    chunks = [next(iter(stream))]  # in flight now
    rest = threading.Thread(target=lambda: chunks.extend(stream))
    rest.start()
    world.approver.revoke(world.adapters["write@1"]["id"], reason="test")
    start = time.monotonic()
    # /v1/models lists each served name's LoRA by its version name: write@1 for both
    until(lambda: "write@1" not in server.served_names())
    world.timings["revoke-to-unlisted s"] = time.monotonic() - start
    assert refused(server, "write@1")
    assert refused(server, "prod/write")
    world.timings["revoke-to-refusal s"] = took = time.monotonic() - start
    rest.join(120)
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert chunks[-1].choices[0].finish_reason == "length", chunks[-1]
    assert len(text) > 0
    assert took < SLO_S, took
    until(lambda: not (server.library / "write@1").exists(), timeout=5)


def test_the_server_is_listed_as_a_node(world: World, server: Server) -> None:
    def listed() -> dict[str, Any]:
        out = subprocess.run(
            [*weact_command(), "nodes", "--json"], capture_output=True, text=True, check=True,
            env={**os.environ, "WEACT_URL": world.registry.url,
                 "WEACT_TOKEN": world.admin._transport.token or ""},
        )  # fmt: skip
        return {n["id"]: n for n in json.loads(out.stdout)}.get(NODE_ID, {})

    until(lambda: "write@2" in listed().get("audit", {}).get("adapters", {}), timeout=10)
    node = listed()
    assert node["audit"]["adapters"]["plan@1"] == world.adapters["plan@1"]["manifest_root"]
    assert "write@1" not in node["audit"]["adapters"]  # revoked: no longer served
    assert "last check" in node["audit"]["detail"]
    assert node["stale"] is False


def test_with_a_root_an_insiders_adapter_is_refused_and_the_signed_one_served(
    world: World, server: Server
) -> None:
    """The insider holds only the admin token: new principals, keys of their own."""
    plan, write2 = world.adapters["plan@1"], world.adapters["write@2"]
    backbone, order = plan["backbone"], ["plan", "write"]
    ids = {"plan": plan["id"], "write": write2["id"]}
    world.approver.promote("prod", ids, backbone=backbone, order=order,
                           signer=world.signer("approver"))  # fmt: skip
    until(lambda: server.complete("prod/write", max_tokens=1).model == "write@2", every=0.05)
    minted = {r: world.admin.create_token(name=f"mallory-{r}", role=r)["token"]
              for r in ("publisher", "approver")}  # fmt: skip
    path = build_adapters(world.backbone, world.workdir / "evil", {"write@4": 5})["write@4"]
    with (
        RegistryClient(world.registry.url, minted["publisher"]) as pub,
        RegistryClient(world.registry.url, minted["approver"]) as app,
    ):
        evil = pub.push_adapter(path, capability="write", backbone=backbone,
                                signer=world.signer("mallory"))  # fmt: skip
        app.sign_approval(evil["id"], world.signer("mallory"))
        app.approve(evil["id"])
        start = time.monotonic()
        app.promote("prod", {**ids, "write": evil["id"]}, backbone=backbone, order=order,
                    signer=world.signer("mallory"))  # fmt: skip

    def said() -> str:
        return str({n["id"]: n for n in world.admin.list_nodes()}[NODE_ID]["audit"]["detail"])

    # The insider's own reason: the signed revision before it may have been refused for a
    # moment too (checked before its co-signature landed, then again after a backoff).
    until(lambda: "0 of 1 publish signature(s)" in said(), timeout=10)
    world.timings["insider-promote-to-refused s"] = time.monotonic() - start
    assert f"{evil['name']} is not trusted" in said()
    assert refused(server, evil["name"])
    assert server.tokens("prod/write")[0] == "write@2"  # the last verified revision serves
    assert not (server.library / evil["name"]).exists()
    log = server.log.read_text()
    assert f"refusing LoRA '{evil['name']}' from the registry" in log
    assert "still serving revision" in log


def test_runtime_updating_without_an_api_key_refuses_to_start(world: World) -> None:
    argv = server_argv(world, free_port(), api_key=False)
    env = server_env(world, world.workdir / "nokey-library")
    env.pop("VLLM_API_KEY", None)
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if "refusing to start" in line]
    assert len(lines) == 1, done.stderr[-2000:]
    assert "--api-key" in lines[0]


def test_evaluation_mode_serves_candidates_by_version(world: World, server: Server) -> None:
    server.stop()  # one vLLM at a time on this machine
    evaluation = start_server(world, "evaluation", WEACT_VLLM_SERVE_CANDIDATES="evaluation")
    try:
        assert evaluation.tokens("write@3")[0] == "write@3"
        evaluation.stop()
    finally:
        evaluation.stop()
