"""The product around the registry: train a new capability `code` on generated trajectories,
publish it with its provenance, promote it, then a runtime node pulls prod over HTTP, serves it
from `PeftEngine`, audits the resident weights against the registry and runs one hard-policy
episode. These steps need torch and peft; each imports them on first use.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cli.demo.harness import Demo, Node, Step, Training, record, say

CODE = ("code", "Write a small program over the collected evidence.")
PHASES = ("plan", "search", "code", "write")
TRAIN_TRAJECTORIES, HELD_OUT_TRAJECTORIES = 8, 4
ORDER = ["plan", "search", "write"]
NODE_ID = "node-1"
TASK_SPLIT = "test"  # the episode answers the default world's first test question


def train_code(demo: Demo) -> None:
    from transformers import AutoTokenizer

    from trainers.evaluate import evaluate_nll
    from trainers.lora import LoraSettings, train_lora
    from trainers.phases import build_samples
    from trainers.publish import data_record
    from trainers.tasks import generate
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
    record(demo, result["revision"], note)


def start_node(demo: Demo) -> None:
    from clikit.progress import steps
    from runtime import sync
    from runtime.engines.peft import PeftEngine

    assert demo.weights is not None
    created = demo.client("admin").create_token(name=NODE_ID, role="node")
    demo.login(NODE_ID, created["token"])
    revision, specs = sync.pull_library(
        demo.client(NODE_ID), "prod", demo.workdir / "node", steps=steps
    )
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
    task = _task()
    episode = _episode(demo.node.engine, task)
    demo.node.episode = episode
    say(f"task {task!r}; hard order {' -> '.join(ORDER)} (tiny random model: its text is noise)")
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


def _task() -> str:
    from tasks.research import default_world

    return default_world().questions[TASK_SPLIT][0].question


def _episode(engine: Any, task: str) -> Any:
    import anyio

    from runtime.agent import Agent, AgentConfig
    from runtime.episode import EpisodeManager
    from runtime.mcp_client import McpToolbox
    from runtime.policy import make_policy
    from tasks.tools import serve_default_tools

    policy = make_policy("hard", ORDER, engine.adapters)
    episode = EpisodeManager(engine, policy=policy).create(task=task)
    config = AgentConfig(max_steps=10, max_new_tokens=24)

    async def main() -> None:
        async with McpToolbox([serve_default_tools()]) as toolbox:
            await Agent(engine.tokenizer, toolbox, config).run(episode, task)

    anyio.run(main)
    return episode


PRODUCT_STEPS: list[Step] = [
    Step("Generate trajectories, train a new capability `code` (LoRA, 1 epoch)", train_code),
    Step("Publish code with its provenance (trainers.publish), approve", publish_code),
    Step("Promote code into prod", promote_code),
    Step("Runtime node: pull prod (runtime.sync) and start PeftEngine", start_node),
    Step("Audit the resident weights and post a heartbeat", audit_node),
    Step("Run a hard-policy episode plan -> search -> write", run_episode),
]
