"""Where each method's episode time went, from the timings the runtime recorded per episode
(`runtime.episode.totals`, kept in each result): the share spent in adapter control (the
load/offload switches) and in KV rebuild after a switch, and the time to answer per episode
beside Full SFT's; and the run's stage times.

Shares are sums over the method's episodes (switch seconds / episode seconds), like the
paper's "share of time". Episodes run concurrently, so an episode's seconds include waiting
for the others it shares the engine with: time to answer is a latency under that load, the
same load for every method of a run.
"""

from __future__ import annotations

from collections.abc import Mapping
from statistics import median
from typing import Any

from evals.reproduce.report import LABELS, METHODS

PAPER_SHARES = {"switch": 8.2, "rebuild": 2.8}  # % of time, the paper's efficiency figures
BASELINE = "full_sft"  # time to answer is compared with Full SFT's


def efficiency(results: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """{method: {"n", "elapsed_s", "switch_s", "rebuild_s", "switch_share", "rebuild_share",
    "answer_mean_s", "answer_median_s", "decoded_mean", "vs_full_sft" (mean time to answer /
    Full SFT's), and "prefilled_mean" where every episode recorded its prefilled tokens}}
    for the methods whose every episode recorded its switch and rebuild seconds."""
    out: dict[str, dict[str, float]] = {}
    for method, items in results.items():
        done = list(items.values())
        if not done or any(r.switch_s is None or r.rebuild_s is None for r in done):
            continue
        elapsed = sum(r.elapsed_s for r in done)
        switch = sum(r.switch_s for r in done)
        rebuild = sum(r.rebuild_s for r in done)
        out[method] = {
            "n": float(len(done)),
            "elapsed_s": elapsed,
            "switch_s": switch,
            "rebuild_s": rebuild,
            "switch_share": switch / elapsed if elapsed > 0 else 0.0,
            "rebuild_share": rebuild / elapsed if elapsed > 0 else 0.0,
            "answer_mean_s": elapsed / len(done),
            "answer_median_s": median(r.elapsed_s for r in done),
            "decoded_mean": sum(r.decoded for r in done) / len(done),
        }
        if all(r.prefilled is not None for r in done):
            out[method]["prefilled_mean"] = sum(r.prefilled or 0 for r in done) / len(done)
    base = out.get(BASELINE)
    if base and base["answer_mean_s"] > 0:
        for row in out.values():
            row["vs_full_sft"] = row["answer_mean_s"] / base["answer_mean_s"]
    return out


def efficiency_lines(rows: Mapping[str, Mapping[str, float]], engine: str) -> list[str]:
    """The efficiency table of the report (markdown)."""
    if not rows:
        return ["No method recorded its switch and rebuild times (results of an older run)."]
    lines = [
        f"Per method on the {engine} engine, summed over its test episodes (the runtime's own "
        "timers: `runtime.episode.totals`). Adapter control: the load_lora / offload_lora "
        "switches (on vLLM a switch names the next request's LoRA; moving its weights into a "
        "slot happens inside that request's prefill, so it is counted there, not here). KV "
        "rebuild: prefill time re-processing history the episode had already run under "
        "another configuration (vLLM times requests, not tokens: its prefill time scaled by "
        "the rebuilt share of its tokens); for WeAct-soft that includes the bare backbone's "
        "scoring of each choice, which re-processes the phase an adapter ran under every "
        "listing of load_lora. Tokens per episode: prompt tokens the engine processed (not "
        "served from its prefix cache; a choice's scoring included) and tokens generated (a "
        "chosen move's included), what the time goes on. Episodes run concurrently, so times "
        "to answer are "
        "latencies under the run's load. The paper: adapter control "
        f"{PAPER_SHARES['switch']} % and cache handling {PAPER_SHARES['rebuild']} % of time.",
        "",
        "| Method | episodes | adapter control | KV rebuild | tokens per episode: prefilled, "
        "decoded | time to answer, mean (median) | vs Full SFT |",
        "|---|---|---|---|---|---|---|",
    ]
    for method in [m for m in METHODS if m in rows]:
        r = rows[method]
        versus = f"{r['vs_full_sft']:.2f}x" if "vs_full_sft" in r else ""
        prefilled = f"{r['prefilled_mean']:.0f}" if "prefilled_mean" in r else "?"
        lines.append(
            f"| {LABELS[method]} | {int(r['n'])} | {100 * r['switch_share']:.2f} % "
            f"({r['switch_s']:.2f} s) | {100 * r['rebuild_share']:.2f} % ({r['rebuild_s']:.1f} s) "
            f"| {prefilled}, {r['decoded_mean']:.0f} "
            f"| {r['answer_mean_s']:.1f} s ({r['answer_median_s']:.1f} s) | {versus} |"
        )
    return lines


STAGES = {
    "train_plan_s": "train plan",
    "train_search_s": "train search",
    "train_code_s": "train code",
    "train_write_s": "train write",
    "train_write++_s": "train write++ (dev data)",
    "train_write-bad_s": "train write-bad (shuffled answers)",
    "continual_s": "continual part (registry, gate)",
    "merges_s": "merges (Full Additive, TIES, DARE-TIES)",
    "single_lora_s": "Single LoRA",
    "full_sft_s": "Full SFT",
}


def stage_lines(timings: Mapping[str, float]) -> list[str]:
    """Every stage's wall time in the order it ran (the `timings` dict's order)."""
    lines = ["| Stage | wall time |", "|---|---|"]
    for key, seconds in timings.items():
        if key == "wall_s":
            continue
        if key.startswith("episodes_"):
            method = key.removeprefix("episodes_").removesuffix("_s")
            name = f"episodes: {LABELS.get(method, method)}"
        else:
            name = STAGES.get(key, key.removesuffix("_s").replace("_", " "))
        lines.append(f"| {name} | {seconds:.1f} s |")
    if "wall_s" in timings:
        lines.append(f"| **whole run** | **{timings['wall_s']:.1f} s** |")
    return lines
