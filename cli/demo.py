"""`weact demo`: the registry end to end on embedded defaults, one printed step at a time.

The demo starts `weact serve` as a subprocess (SQLite + a local blob directory in a temp
folder, on a free port), then walks the lifecycle through `registry.client`: tokens, a
backbone, the plan/search/write capabilities, three adapters, approval by a second
principal, promotion, an updated write++ with lineage, rollback, revocation, and a check of
the audit chain.

Steps are data (`STEPS`, a list of `Step`), each a function of the shared `Demo` state, so
later stages (runtime, training) are added by appending steps.
"""

from __future__ import annotations

import array
import contextlib
import json
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


def _record(demo: Demo, rev: Revision, note: str) -> None:
    demo.revisions.append(rev)
    library = ", ".join(entry["name"] for _, entry in sorted(rev["library"].items()))
    say(f"{rev['channel']} r{rev['revision']}: {library}  [{rev['library_digest'][:12]}]  {note}")


STEPS: list[Step] = [
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
    Step("Verify the audit event chain", verify_audit),
]


def run_demo(workdir: Path, steps: Sequence[Step] = STEPS, *, plain_weights: bool = False) -> Demo:
    """Run `steps` in order, printing each; returns the final state."""
    demo = Demo(workdir=workdir, plain_weights=plain_weights)
    with demo.stack:
        for number, step in enumerate(steps, 1):
            started = time.perf_counter()
            console.print(f"[bold][{number}/{len(steps)}] {step.title}[/bold]")
            step.run(demo)
            console.print(f"    [dim]{time.perf_counter() - started:.2f} s[/dim]")
    return demo


@click.command()
@click.option("--keep", is_flag=True, help="Keep the temp directory (registry, weights).")
@click.option("--plain", is_flag=True, help="Build the weights without torch/peft.")
def demo(keep: bool, plain: bool) -> None:
    """Run the end-to-end demo on embedded defaults."""
    workdir = Path(tempfile.mkdtemp(prefix="weact-demo-"))
    started = time.perf_counter()
    try:
        run_demo(workdir, plain_weights=plain)
    except (errors.RegistryError, httpx.HTTPError, RuntimeError, OSError) as exc:
        raise click.ClickException(f"demo failed: {exc}") from exc
    finally:
        if keep:
            console.print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    console.print(f"[bold green]demo done in {time.perf_counter() - started:.1f} s[/bold green]")
