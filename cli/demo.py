"""`weact demo`: the product end to end on embedded defaults, one printed step at a time.

The demo starts `weact serve` as a subprocess (SQLite + a local blob directory in a temp
folder, on a free port), then walks the lifecycle through `registry.client`: tokens, a
backbone, the plan/search/write capabilities, three adapters, approval by a second
principal, promotion, an updated write++ with lineage, rollback and revocation. Then the
product around it: deterministic trajectories train a new capability `code` (trainers), which
is published with its provenance, approved and promoted into prod; a runtime node pulls prod
over HTTP (`runtime.sync`), serves it from `PeftEngine`, audits the resident weights against
the registry's manifest roots, posts a heartbeat and runs one hard-policy episode. The audit
event chain is verified last. `--plain` (no torch) runs the registry steps only.

Steps are data (`STEPS`, a list of `Step`), each a function of the shared `Demo` state.
"""

from __future__ import annotations

import array
import contextlib
import json
import logging
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

import click
import httpx
from rich.console import Console

from registry import errors
from registry.client import ADAPTER_FILES, Adapter, RegistryClient, Revision
from runtime.engine import AdapterSpec
from runtime.errors import RuntimeEngineError
from trainers.errors import TrainerError

console = Console(highlight=False, soft_wrap=True)


# -- an embedded registry in a subprocess ----------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def weact_command() -> list[str]:
    """The `weact` console script of this interpreter (or the same entry point via -c)."""
    script = Path(sys.executable).with_name("weact")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from cli.main import main; main()"]


@dataclass(frozen=True)
class EmbeddedRegistry:
    url: str
    database_url: str
    store_url: str
    process: subprocess.Popen[bytes]
    log: Path


@contextlib.contextmanager
def embedded_registry(
    workdir: Path,
    database_url: str | None = None,
    store_url: str | None = None,
    timeout: float = 30.0,
) -> Iterator[EmbeddedRegistry]:
    """Run `weact serve` on a free port in `workdir` until the block exits.

    What is not given runs on serve's embedded defaults, relative to its working directory:
    SQLite at `./.weact/registry.db` and blobs under `./.weact/blobs`.
    """
    port = free_port()
    argv = weact_command() + ["serve", "--port", str(port), "--log-level", "warning"]
    if database_url is None:
        database_url = f"sqlite:///{workdir / '.weact' / 'registry.db'}"
    else:
        argv += ["--database-url", database_url]
    if store_url is None:
        store_url = str(workdir / ".weact" / "blobs")
    else:
        argv += ["--store", store_url]
    log = workdir / "serve.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            argv, cwd=workdir, env=_isolated_env(), stdout=out, stderr=subprocess.STDOUT
        )
    registry = EmbeddedRegistry(f"http://127.0.0.1:{port}", database_url, store_url, process, log)
    try:
        _wait_healthy(registry, timeout)
        yield registry
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _isolated_env() -> dict[str, str]:
    """This process's environment without the registry settings a user may have exported."""
    return {
        k: v for k, v in os.environ.items() if k not in ("WEACT_DATABASE_URL", "WEACT_STORE_URL")
    }


def _wait_healthy(registry: EmbeddedRegistry, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if registry.process.poll() is not None:
            raise RuntimeError(f"weact serve exited:\n{registry.log.read_text()[-2000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{registry.url}/v1/healthz", timeout=1).status_code == 200:
                return
        time.sleep(0.1)
    raise RuntimeError(f"weact serve not healthy after {timeout} s:\n{registry.log.read_text()}")


def create_token_directly(database_url: str, name: str, role: str) -> str:
    """Bootstrap: a token written straight into the database (as `weact token create`)."""
    from registry.db.session import session_scope
    from registry.services.tokens import create_token

    with session_scope(database_url) as session:
        _, secret = create_token(session=session, name=name, role=role)
    return secret


# -- weights ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Weights:
    backbone: Path
    adapters: dict[str, Path]
    """Adapter directory by label: plan, search, write, write++."""
    kind: str


ADAPTER_SEEDS = {"plan": 1, "search": 2, "write": 3, "write++": 4}


def build_weights(root: Path) -> Weights:
    """A tiny llama backbone and four LoRA adapters: torch+peft if installed, else plain."""
    try:
        from transformers.utils import logging as hf_logging

        from runtime.tiny import build_tiny_adapter, build_tiny_backbone
    except ImportError:
        return build_plain_weights(root)
    hf_logging.disable_progress_bar()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # transformers deprecations, not ours
        backbone = build_tiny_backbone(root / "backbone")
        adapters = {
            label: build_tiny_adapter(backbone, root / label.replace("+", "p"), seed=seed)
            for label, seed in ADAPTER_SEEDS.items()
        }
    return Weights(backbone, adapters, "llama + peft (torch)")


PLAIN_HIDDEN, PLAIN_LAYERS, PLAIN_VOCAB, PLAIN_RANK = 32, 2, 128, 4
Tensors: TypeAlias = "dict[str, tuple[tuple[int, ...], array.array[float]]]"


def build_plain_weights(root: Path) -> Weights:
    """The same layout without torch: llama-shaped safetensors written with the stdlib."""
    backbone = root / "backbone"
    backbone.mkdir(parents=True)
    write_safetensors(backbone / "model.safetensors", _plain_backbone_tensors(seed=0))
    adapters = {}
    for label, seed in ADAPTER_SEEDS.items():
        path = root / label.replace("+", "p")
        path.mkdir()
        write_safetensors(path / "adapter_model.safetensors", _plain_lora_tensors(seed))
        (path / "adapter_config.json").write_text(json.dumps(_plain_lora_config(), indent=2))
        adapters[label] = path
    return Weights(backbone, adapters, "llama-shaped safetensors (no torch)")


def _plain_backbone_tensors(seed: int) -> Tensors:
    h, v = PLAIN_HIDDEN, PLAIN_VOCAB
    shapes: dict[str, tuple[int, ...]] = {
        "model.embed_tokens.weight": (v, h),
        "model.norm.weight": (h,),
        "lm_head.weight": (v, h),
    }
    for i in range(PLAIN_LAYERS):
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            shapes[f"model.layers.{i}.self_attn.{proj}.weight"] = (h, h)
    return {
        name: (shape, _random_floats(shape, seed + n))
        for n, (name, shape) in enumerate(shapes.items())
    }


def _plain_lora_tensors(seed: int) -> Tensors:
    h, r = PLAIN_HIDDEN, PLAIN_RANK
    tensors: Tensors = {}
    for i in range(PLAIN_LAYERS):
        for proj in ("q_proj", "v_proj"):
            prefix = f"base_model.model.model.layers.{i}.self_attn.{proj}"
            for part, shape in (("lora_A", (r, h)), ("lora_B", (h, r))):
                name = f"{prefix}.{part}.weight"
                tensors[name] = (shape, _random_floats(shape, seed * 1000 + len(tensors)))
    return tensors


def _plain_lora_config() -> dict[str, Any]:
    return {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": None,
        "r": PLAIN_RANK,
        "lora_alpha": 2 * PLAIN_RANK,
        "lora_dropout": 0.0,
        "bias": "none",
        "target_modules": ["q_proj", "v_proj"],
        "inference_mode": True,
    }


def _random_floats(shape: Sequence[int], seed: int) -> array.array[float]:
    import random

    rng = random.Random(seed)
    count = 1
    for dim in shape:
        count *= dim
    return array.array("f", (rng.gauss(0.0, 0.2) for _ in range(count)))


def write_safetensors(path: Path, tensors: Tensors) -> None:
    """A float32 safetensors file from stdlib arrays (little-endian, offsets in name order)."""
    header: dict[str, Any] = {}
    chunks: list[bytes] = []
    offset = 0
    for name in sorted(tensors):
        shape, values = tensors[name]
        if sys.byteorder != "little":
            values = array.array("f", values)
            values.byteswap()
        data = values.tobytes()
        header[name] = {
            "dtype": "F32",
            "shape": list(shape),
            "data_offsets": [offset, offset + len(data)],
        }
        chunks.append(data)
        offset += len(data)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"".join(chunks))


# -- the demo --------------------------------------------------------------------------


@dataclass(frozen=True)
class Training:
    """The `code` adapter trained by the demo."""

    out: Path
    data: Path
    nll_before: float
    nll_after: float


@dataclass
class Node:
    """A runtime node: what it pulled and the engine serving it."""

    revision: Revision
    specs: list[AdapterSpec]
    engine: Any
    episode: Any = None


@dataclass
class Demo:
    """State shared by the steps."""

    workdir: Path
    plain_weights: bool = False
    registry: EmbeddedRegistry | None = None
    tokens: dict[str, str] = field(default_factory=dict)
    clients: dict[str, RegistryClient] = field(default_factory=dict)
    weights: Weights | None = None
    backbone_root: str = ""
    adapters: dict[str, Adapter] = field(default_factory=dict)
    revisions: list[Revision] = field(default_factory=list)
    training: Training | None = None
    node: Node | None = None
    stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    def client(self, principal: str) -> RegistryClient:
        return self.clients[principal]

    def login(self, principal: str, token: str) -> None:
        assert self.registry is not None
        self.tokens[principal] = token
        client = RegistryClient(self.registry.url, token)
        self.clients[principal] = self.stack.enter_context(client)


@dataclass(frozen=True)
class Step:
    title: str
    run: Callable[[Demo], None]


def say(text: str) -> None:
    console.print(f"    {text}", markup=False)


def start_registry(demo: Demo) -> None:
    demo.registry = demo.stack.enter_context(embedded_registry(demo.workdir))
    say(f"weact serve at {demo.registry.url}  (SQLite + blobs under {demo.workdir}/.weact)")


def create_tokens(demo: Demo) -> None:
    assert demo.registry is not None
    demo.login("admin", create_token_directly(demo.registry.database_url, "admin", "admin"))
    say("admin      admin      (written to the database, like `weact token create`)")
    for principal, role in (
        ("alice", "publisher"),
        ("bob", "approver"),
        ("alice-approver", "approver"),
    ):
        name = principal.split("-")[0]
        created = demo.client("admin").create_token(name=name, role=role)
        demo.login(principal, created["token"])
        say(f"{name:<10} {role:<10} (POST /v1/tokens)")


def build_demo_weights(demo: Demo) -> None:
    root = demo.workdir / "weights"
    demo.weights = build_plain_weights(root) if demo.plain_weights else build_weights(root)
    say(f"{demo.weights.kind}: backbone + adapters {', '.join(demo.weights.adapters)}")


def register_backbone(demo: Demo) -> None:
    from storage.manifest import manifest_of_path

    assert demo.weights is not None
    manifest = manifest_of_path(demo.weights.backbone)
    created = demo.client("admin").register_backbone(name="tiny-llama", manifest=manifest.to_json())
    demo.backbone_root = created["root"]
    say(f"{created['name']}: {created['tensor_count']} tensors, {created['param_count']} params")
    say(f"manifest root {created['root']}")


CAPABILITIES = {
    "plan": "Break the research question into steps.",
    "search": "Query the knowledge base and collect evidence.",
    "write": "Write the cited answer.",
}


def create_capabilities(demo: Demo) -> None:
    for order, (name, description) in enumerate(CAPABILITIES.items()):
        demo.client("admin").create_capability(name=name, description=description, order=order)
        say(f"{name} (order {order}): {description}")


def push_adapters(demo: Demo) -> None:
    assert demo.weights is not None
    for capability in CAPABILITIES:
        pushed = demo.client("alice").push_adapter(
            demo.weights.adapters[capability],
            capability=capability,
            backbone=demo.backbone_root,
            provenance={"capabilities": [capability], "seed": ADAPTER_SEEDS[capability]},
        )
        demo.adapters[capability] = pushed
        root = pushed["manifest_root"][:16]
        say(f"{pushed['name']} (id {pushed['id']}) {pushed['state']}, manifest {root}")


def approve_adapters(demo: Demo) -> None:
    first = demo.adapters["plan"]
    try:
        demo.client("alice-approver").approve(first["id"])
    except errors.RegistryError as exc:
        say(f"alice approving her own {first['name']}: refused ({exc.code}: {exc.detail})")
    else:
        raise RuntimeError("the registry let a publisher approve her own adapter")
    for capability in CAPABILITIES:
        approved = demo.client("bob").approve(demo.adapters[capability]["id"])
        demo.adapters[capability] = approved
        say(f"bob approved {approved['name']}")


def promote_library(demo: Demo) -> None:
    ids = {capability: demo.adapters[capability]["id"] for capability in CAPABILITIES}
    result = demo.client("bob").promote(
        "prod", ids, backbone=demo.backbone_root, order=list(CAPABILITIES)
    )
    _record(demo, result["revision"], f"gate passed ({len(result['gate']['checks'])} checks)")


def push_write_plus_plus(demo: Demo) -> None:
    assert demo.weights is not None
    parent = demo.adapters["write"]
    pushed = demo.client("alice").push_adapter(
        demo.weights.adapters["write++"],
        capability="write",
        backbone=demo.backbone_root,
        parent_id=parent["id"],
        label="write++",
        provenance={"capabilities": ["write"], "replay": False, "seed": ADAPTER_SEEDS["write++"]},
    )
    demo.adapters["write++"] = demo.client("bob").approve(pushed["id"])
    say(f"{pushed['name']} label {pushed['label']!r}, parent {parent['name']}; approved by bob")


def show_lineage(demo: Demo) -> None:
    lineage = demo.client("alice").lineage(demo.adapters["write++"]["id"])
    chain = [*lineage["ancestors"], lineage["adapter"]]
    say(" -> ".join(a["name"] + (f" ({a['label']})" if a["label"] else "") for a in chain))


def promote_update(demo: Demo) -> None:
    current = demo.revisions[-1]["revision"]
    result = demo.client("bob").promote(
        "prod", {"write": demo.adapters["write++"]["id"]}, expected_revision=current
    )
    _record(demo, result["revision"], "write -> write++; plan and search untouched")


def roll_back(demo: Demo) -> None:
    first = demo.revisions[0]["revision"]
    rev = demo.client("bob").rollback(
        "prod", to_revision=first, expected_revision=demo.revisions[-1]["revision"]
    )
    same = rev["library_digest"] == demo.revisions[0]["library_digest"]
    _record(demo, rev, f"library equal to r{first}: {same}")


def pull_library(demo: Demo) -> None:
    assert demo.weights is not None
    prod = demo.client("alice").get_channel("prod")
    for capability, entry in sorted(prod["library"].items()):
        target = demo.client("alice").pull_adapter(
            entry["adapter_id"], demo.workdir / "pulled" / capability
        )
        pushed = demo.weights.adapters[capability]
        same = all(
            (target / name).read_bytes() == (pushed / name).read_bytes() for name in ADAPTER_FILES
        )
        say(f"{entry['name']} -> {target.name}/ verified, byte-identical to the push: {same}")


def revoke_update(demo: Demo) -> None:
    revoked = demo.client("bob").revoke(
        demo.adapters["write++"]["id"], reason="regressed on old tasks"
    )
    say(f"{revoked['name']} is {revoked['state']}")


def verify_audit(demo: Demo) -> None:
    report = demo.client("admin").verify_events()
    if not report["ok"]:
        raise RuntimeError(f"event chain broken at {report['first_broken']}: {report['detail']}")
    say(f"{report['count']} events, hash chain intact")


# -- training, publishing, a runtime node ----------------------------------------------

CODE = ("code", "Write a small program over the collected evidence.")
PHASES = ("plan", "search", "write", "code")
TRAIN_TRAJECTORIES, HELD_OUT_TRAJECTORIES = 8, 4
ORDER = ["plan", "search", "write"]
NODE_ID = "node-1"
TASK = "What is the capital of France?"


def train_code(demo: Demo) -> None:
    from transformers import AutoTokenizer

    from trainers.data import generate
    from trainers.evaluate import evaluate_nll
    from trainers.lora import LoraSettings, train_lora
    from trainers.phases import build_samples
    from trainers.publish import data_record
    from trainers.trajectory import write_trajectories

    assert demo.weights is not None
    backbone = demo.weights.backbone
    trajectories = generate(TRAIN_TRAJECTORIES, seed=0, phases=PHASES)
    data = write_trajectories(demo.workdir / "code.jsonl", trajectories)
    tokenizer = AutoTokenizer.from_pretrained(backbone)
    train = build_samples(trajectories, tokenizer, {"code"})
    held = build_samples(
        generate(HELD_OUT_TRAJECTORIES, seed=1, phases=PHASES), tokenizer, {"code"}
    )
    say(
        f"{TRAIN_TRAJECTORIES} trajectories {' -> '.join(PHASES)} -> {data.name}; "
        f"{len(train)} code samples, {len(held)} held out"
    )
    before = evaluate_nll(backbone=backbone, samples=held, assignment={"code": None})["code"]
    settings = LoraSettings(rank=4, alpha=8, lr=1e-2, epochs=1)
    result = train_lora(
        backbone=backbone,
        adapter="code",
        samples=train,
        out=demo.workdir / "weights" / "code",
        settings=settings,
        record=data_record([data]),
    )
    after = evaluate_nll(backbone=backbone, samples=held, assignment={"code": result.out})["code"]
    demo.training = Training(result.out, data, before.mean, after.mean)
    say(f"{len(result.losses)} steps, train loss {result.losses[0]:.3f} -> {result.losses[-1]:.3f}")
    say(f"held-out masked NLL per code token: backbone {before.mean:.3f} -> code {after.mean:.3f}")


def publish_code(demo: Demo) -> None:
    from trainers.publish import publish_adapter

    assert demo.training is not None
    name, description = CODE
    demo.client("admin").create_capability(name=name, description=description, order=len(ORDER))
    pushed = publish_adapter(demo.training.out, client=demo.client("alice"), capability=name)
    prov = pushed["provenance"]
    say(
        f"{pushed['name']} (id {pushed['id']}) {pushed['state']}, manifest "
        f"{pushed['manifest_root'][:16]}"
    )
    say(
        f"provenance: capabilities {prov['capabilities']}, replay {prov['replay']}, "
        f"data {prov['data_digests'][0][:12]}, seed {prov['seed']}"
    )
    demo.adapters["code"] = demo.client("bob").approve(pushed["id"])
    say(f"bob approved {pushed['name']}")


def promote_code(demo: Demo) -> None:
    result = demo.client("bob").promote(
        "prod",
        {"code": demo.adapters["code"]["id"]},
        order=[*ORDER, "code"],
        expected_revision=demo.revisions[-1]["revision"],
    )
    gate = result["gate"]
    note = f"gate {'passed' if gate['passed'] else 'FAILED'} ({len(gate['checks'])} checks)"
    _record(demo, result["revision"], note)


def start_node(demo: Demo) -> None:
    from runtime import sync
    from runtime.engines.peft import PeftEngine

    assert demo.weights is not None
    created = demo.client("admin").create_token(name=NODE_ID, role="node")
    demo.login(NODE_ID, created["token"])
    revision, specs = sync.pull_library(demo.client(NODE_ID), "prod", demo.workdir / "node")
    for spec in specs:
        say(
            f"{spec.version:<9} -> node/{Path(spec.path).name}/ verified, "
            f"expects root {(spec.manifest_root or '')[:16]}"
        )
    engine = PeftEngine(demo.weights.backbone, specs)
    demo.node = Node(revision, specs, engine)
    resident = ", ".join(engine.adapters)
    say(f"PeftEngine: backbone + {resident} resident (prod r{revision['revision']})")


def audit_node(demo: Demo) -> None:
    from runtime import sync

    assert demo.node is not None
    report = demo.node.engine.audit()
    expected = {c: e["manifest_root"] for c, e in demo.node.revision["library"].items()}
    if not report.ok or dict(report.adapters) != expected:
        raise RuntimeError(f"engine audit disagrees with the registry: {report}")
    say(
        f"backbone root recomputed from memory equals the registry's: "
        f"{report.backbone_root == demo.backbone_root}"
    )
    say(f"adapter roots equal prod's manifest roots: {', '.join(sorted(report.adapters))}")
    rev = demo.node.revision["revision"]
    sync.heartbeat(demo.client(NODE_ID), NODE_ID, "prod", rev, report)
    for node in demo.client("admin").list_nodes():
        say(
            f"node {node['id']}: {node['channel']} r{node['revision']}, audit_ok "
            f"{node['audit_ok']}, last heartbeat {node['last_heartbeat']}"
        )


def run_episode(demo: Demo) -> None:
    assert demo.node is not None
    episode = _episode(demo.node.engine)
    demo.node.episode = episode
    say(f"task {TASK!r}; hard order {' -> '.join(ORDER)} (tiny random model: its text is noise)")
    say("step  active   prefilled  hit  decoded  switch ms  rebuild ms  tool calls")
    for s in episode.steps:
        calls = ", ".join(s.tool_calls) + (" (runtime)" if s.forced else "")
        say(
            f"{s.step:>4}  {s.active or '-':<7} {s.prefilled:>10} {s.cache_hit:>4} "
            f"{s.decoded:>8} {s.switch_s * 1e3:>10.3f} {s.rebuild_s * 1e3:>11.1f}  {calls}"
        )
    if episode.status != "done":
        raise RuntimeError(f"episode failed: {episode.error}")
    loaded = [s.active for s in episode.steps if s.decoded and s.active]
    say(
        f"adapters that decoded, in order: {' -> '.join(dict.fromkeys(loaded))}; "
        f"finish: {episode.finish_reason}, {episode.elapsed_s:.2f} s"
    )


def _episode(engine: Any) -> Any:
    import anyio

    from runtime.agent import Agent, AgentConfig
    from runtime.episode import EpisodeManager
    from runtime.kb import serve_search_tool
    from runtime.policy import make_policy
    from runtime.tools import McpToolbox

    policy = make_policy("hard", ORDER, engine.adapters)
    episode = EpisodeManager(engine, policy=policy).create(task=TASK)
    config = AgentConfig(max_steps=10, max_new_tokens=24)

    async def main() -> None:
        async with McpToolbox([serve_search_tool()]) as toolbox:
            await Agent(engine.tokenizer, toolbox, config).run(episode, TASK)

    anyio.run(main)
    return episode


def torch_available() -> bool:
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("torch", "peft"))


def _record(demo: Demo, rev: Revision, note: str) -> None:
    demo.revisions.append(rev)
    library = ", ".join(entry["name"] for _, entry in sorted(rev["library"].items()))
    say(f"{rev['channel']} r{rev['revision']}: {library}  [{rev['library_digest'][:12]}]  {note}")


REGISTRY_STEPS: list[Step] = [
    Step("Start an embedded registry", start_registry),
    Step("Create tokens (admin, publisher alice, approvers bob and alice)", create_tokens),
    Step("Build a tiny backbone and LoRA adapters", build_demo_weights),
    Step("Register the backbone by its manifest", register_backbone),
    Step("Create capabilities plan, search, write", create_capabilities),
    Step("Push three adapters (alice)", push_adapters),
    Step("Approve with a different principal", approve_adapters),
    Step("Promote the library to prod", promote_library),
    Step("Push write++ with --parent write", push_write_plus_plus),
    Step("Show the lineage of write++", show_lineage),
    Step("Promote write++ to prod", promote_update),
    Step("Roll prod back to its first revision", roll_back),
    Step("Pull prod's library (every blob verified by sha256)", pull_library),
    Step("Revoke write++", revoke_update),
]
PRODUCT_STEPS: list[Step] = [
    Step("Generate trajectories, train a new capability `code` (LoRA, 1 epoch)", train_code),
    Step("Publish code with its provenance (trainers.publish), approve", publish_code),
    Step("Promote code into prod", promote_code),
    Step("Runtime node: pull prod (runtime.sync) and start PeftEngine", start_node),
    Step("Audit the resident weights and post a heartbeat", audit_node),
    Step("Run a hard-policy episode plan -> search -> write", run_episode),
]
VERIFY = Step("Verify the audit event chain", verify_audit)
STEPS: list[Step] = [*REGISTRY_STEPS, *PRODUCT_STEPS, VERIFY]
"""Every step: the registry lifecycle, training, a runtime node, the audit chain."""
PLAIN_STEPS: list[Step] = [*REGISTRY_STEPS, VERIFY]
"""Without torch (`--plain`): the registry lifecycle and the audit chain."""


def run_demo(
    workdir: Path, steps: Sequence[Step] | None = None, *, plain_weights: bool = False
) -> Demo:
    """Run `steps` (default: STEPS, PLAIN_STEPS with `plain_weights`) in order, printing each."""
    if steps is None:
        steps = PLAIN_STEPS if plain_weights else STEPS
    demo = Demo(workdir=workdir, plain_weights=plain_weights)
    with demo.stack, warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # transformers deprecations, not ours
        for number, step in enumerate(steps, 1):
            started = time.perf_counter()
            console.print(f"[bold][{number}/{len(steps)}] {step.title}[/bold]")
            step.run(demo)
            console.print(f"    [dim]{time.perf_counter() - started:.2f} s[/dim]")
    return demo


@click.command()
@click.option("--keep", is_flag=True, help="Keep the temp directory (registry, weights).")
@click.option("--plain", is_flag=True, help="Registry steps only, weights built without torch.")
def demo(keep: bool, plain: bool) -> None:
    """Run the end-to-end demo on embedded defaults."""
    # Warnings only; configured first, so that libraries (mcp) cannot raise it to INFO.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if not plain and not torch_available():
        console.print("torch/peft not installed: running the registry steps only (--plain)")
        plain = True
    workdir = Path(tempfile.mkdtemp(prefix="weact-demo-"))
    started = time.perf_counter()
    try:
        run_demo(workdir, plain_weights=plain)
    except (
        errors.RegistryError,
        httpx.HTTPError,
        RuntimeError,
        OSError,
        RuntimeEngineError,
        TrainerError,
    ) as exc:
        raise click.ClickException(f"demo failed: {exc}") from exc
    finally:
        if keep:
            console.print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    console.print(f"[bold green]demo done in {time.perf_counter() - started:.1f} s[/bold green]")
