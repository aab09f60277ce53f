"""`reports/reproduce.md` and its chart: accuracy per method and question kind, the paper's
numbers beside it, the continual part's gate reports, and what the run cost and cut."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evals.reproduce.stats import mean_interval, min_discordant, paired_test, wilson
from tasks.questions import KINDS

METHODS = (
    "backbone", "full_sft", "single_lora", "additive", "ties", "dare_ties", "weact_hard",
    "weact_soft",
)  # fmt: skip
LABELS = {
    "backbone": "Backbone only",
    "full_sft": "Full SFT (every backbone parameter)",
    "single_lora": "Single LoRA (one shared LoRA, all phases)",
    "additive": "Full Additive merge",
    "ties": "TIES merge",
    "dare_ties": "DARE-TIES merge",
    "weact_hard": "WeAct-hard",
    "weact_soft": "WeAct-soft",
}
PAPER = {"weact_hard": 45.47, "full_sft": 42.80, "single_lora": 38.73, "strongest_merge": 35.66}
MERGES = ("additive", "ties", "dare_ties")


REFERENCE = "weact_hard"  # the method every other is tested against, item by item


def table(results: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """{method: {kind: EM %, "mean": macro mean EM %, "f1": %, "doc_recall": %, "n": items,
    "lo:<kind>"/"hi:<kind>" and "lo:mean"/"hi:mean": 95 % interval ends (Wilson per kind,
    seeded bootstrap of the mean), and against WeAct-hard on the same items: "delta" (EM
    points), "delta_lo"/"delta_hi" (paired bootstrap) and "p" (exact McNemar)}}."""
    out = {}
    for method, items in results.items():
        by_kind: dict[str, list[float]] = {k: [] for k in KINDS}
        for r in items.values():
            by_kind.setdefault(r.score.kind, []).append(r.score.em)
        row = {k: 100 * sum(v) / len(v) for k, v in by_kind.items() if v}
        for k, v in by_kind.items():
            if v:
                lo, hi = wilson(round(sum(v)), len(v))
                row[f"lo:{k}"], row[f"hi:{k}"] = 100 * lo, 100 * hi
        row["mean"] = sum(row[k] for k in KINDS if k in row) / max(1, sum(k in row for k in KINDS))
        if items:
            ems = {i: r.score.em for i, r in items.items()}
            lo, hi = mean_interval(ems, seed=f"reproduce:{method}:mean")
            row["lo:mean"], row["hi:mean"] = 100 * lo, 100 * hi
        _paired_columns(row, method, results)
        scores = [r.score for r in items.values()]
        row["f1"] = 100 * sum(s.f1 for s in scores) / max(1, len(scores))
        row["doc_recall"] = 100 * sum(s.doc_recall for s in scores) / max(1, len(scores))
        row["plan_coverage"] = 100 * sum(s.plan_coverage for s in scores) / max(1, len(scores))
        row["n"] = len(scores)
        row["tokens"] = sum(r.decoded for r in items.values())
        out[method] = row
    return out


def _paired_columns(
    row: dict[str, float], method: str, results: Mapping[str, Mapping[str, Any]]
) -> None:
    """The paired test of `method` against WeAct-hard, when both scored the same items."""
    ref = results.get(REFERENCE)
    items = results[method]
    if method == REFERENCE or not ref or set(ref) != set(items):
        return
    t = paired_test(
        {i: r.score.em for i, r in ref.items()},
        {i: r.score.em for i, r in items.items()},
        seed=f"reproduce:{REFERENCE}-vs-{method}",
    )
    row["delta"], row["delta_lo"], row["delta_hi"] = 100 * t.delta, 100 * t.ci_low, 100 * t.ci_high
    row["p"], row["discordant"] = t.p_value, t.reference_only + t.candidate_only
    row["mdd80"] = 100 * t.mdd80


def common_answers(
    results: Mapping[str, Mapping[str, Any]], width: int = 70
) -> dict[str, tuple[str, int, int]]:
    """{method: (its most frequent answer, cut to `width` characters, how often, of n)}: what
    a method that scores nothing says instead."""
    out = {}
    for method, items in results.items():
        said = Counter(" ".join(r.score.answer.split())[:width] for r in items.values())
        if said:
            answer, count = said.most_common(1)[0]
            out[method] = (answer, count, len(items))
    return out


CHOOSERS = ("weact_soft",)  # the methods whose model chooses its adapters


def sequence_lines(
    results: Mapping[str, Mapping[str, Any]], phases: Mapping[str, Sequence[str]]
) -> list[str]:
    """Per kind, what the choosing methods loaded: how often exactly the question's phases in
    order (plan -> search -> write, or with code), a skipped phase, a repeated load, nothing,
    and the most frequent sequences. `phases`: item id -> the question's phases."""
    lines = []
    for method in [m for m in CHOOSERS if m in results]:
        lines += [f"{LABELS[method]}: adapters loaded per test question, by kind", ""]
        head = "question's phases in order | skipped a phase | repeated a load | loaded none"
        lines += [f"| kind | n | {head} | most frequent sequences |", "|---" * 7 + "|"]
        by_kind: dict[str, list[Any]] = {}
        for item_id, r in sorted(results[method].items()):
            by_kind.setdefault(r.score.kind, []).append((r.loads, tuple(phases.get(item_id, ()))))
        for kind in [k for k in KINDS if k in by_kind]:
            rows = by_kind[kind]
            exact = sum(1 for loads, gold in rows if tuple(loads) == gold)
            skipped = sum(1 for loads, gold in rows if set(gold) - set(loads))
            repeated = sum(1 for loads, _ in rows if len(set(loads)) < len(loads))
            none = sum(1 for loads, _ in rows if not loads)
            seqs = Counter(" -> ".join(loads) or "(none)" for loads, _ in rows).most_common(3)
            common = "; ".join(f"{seq} ({count})" for seq, count in seqs)
            lines.append(
                f"| {kind} | {len(rows)} | {exact} | {skipped} | {repeated} | {none} | {common} |"
            )
        lines.append("")
    return lines


def answer_lines(answers: Mapping[str, tuple[str, int, int]]) -> list[str]:
    lines = ["| Method | most frequent answer | items |", "|---|---|---|"]
    for method in [m for m in METHODS if m in answers]:
        answer, count, n = answers[method]
        shown = answer.replace("|", "\\|").replace("`", "'") or "(empty)"
        lines.append(f"| {LABELS[method]} | `{shown}` | {count} of {n} |")
    return lines


def degenerate(rows: Mapping[str, Mapping[str, float]]) -> list[str]:
    """Methods that score 0 % or 100 % on every kind (a suite that does not separate)."""
    bad = []
    for method, row in rows.items():
        values = [row[k] for k in KINDS if k in row]
        if values and (all(v == 0 for v in values) or all(v == 100 for v in values)):
            bad.append(method)
    return bad


def _paper(method: str, rows: Mapping[str, Mapping[str, float]]) -> str:
    if method in ("weact_hard", "single_lora", "full_sft"):
        return f"{PAPER[method]:.2f}"
    merges = [m for m in MERGES if m in rows]
    if merges and method == max(merges, key=lambda m: rows[m]["mean"]):
        return f"{PAPER['strongest_merge']:.2f} (strongest static merge)"
    return ""


def _cell(r: Mapping[str, float], key: str, bold: bool = False) -> str:
    if key not in r:
        return "nan"
    value = f"**{r[key]:.1f}**" if bold else f"{r[key]:.1f}"
    if f"lo:{key}" not in r:
        return value
    return f"{value} [{r[f'lo:{key}']:.0f}, {r[f'hi:{key}']:.0f}]"


def _versus(method: str, r: Mapping[str, float]) -> str:
    if method == REFERENCE:
        return "(reference)"
    if "p" not in r:
        return ""
    mark = " *" if r["p"] < 0.05 else ""
    # 0.0 - x, not -x: a tie prints 0, not -0
    delta, lo, hi = 0.0 - r["delta"], 0.0 - r["delta_hi"], 0.0 - r["delta_lo"]
    return f"{delta:+.1f} [{lo:.0f}, {hi:.0f}], p={r['p']:.3f}{mark}"


def accuracy_table(rows: Mapping[str, Mapping[str, float]]) -> list[str]:
    """EM % per kind and mean with 95 % intervals, and WeAct-hard minus the method on the
    same items (paired bootstrap interval, exact McNemar p; * where p < 0.05)."""
    head = ["Method", *KINDS, "mean EM", "WeAct-hard minus it", "F1", "doc recall", "tokens"]
    head.append("paper (mean acc.)")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for method in [m for m in METHODS if m in rows]:
        r = rows[method]
        cells = [LABELS[method], *(_cell(r, k) for k in KINDS), _cell(r, "mean", bold=True)]
        cells += [_versus(method, r), f"{r['f1']:.1f}", f"{r['doc_recall']:.1f}"]
        cells += [str(int(r["tokens"])), _paper(method, rows)]
        lines.append("| " + " | ".join(cells) + " |")
    if "full_sft" not in rows:
        blank = [""] * (len(head) - 2)
        lines.append(
            "| "
            + " | ".join(["Full SFT (not run here)", *blank, f"{PAPER['full_sft']:.2f}"])
            + " |"
        )
    return lines


def power_lines(rows: Mapping[str, Mapping[str, float]]) -> list[str]:
    """What the size can show: the smallest difference the paired test can ever call
    significant, and the one it detects with 80 % power at each observed discordance."""
    ref = rows.get(REFERENCE)
    if not ref:
        return []
    n = int(ref["n"])
    d = min_discordant()
    bound = (
        f"so no difference below {100 * d / n:.1f} points can be significant at n = {n}"
        if d <= n
        else f"so no difference can be significant at n = {n}"
    )
    lines = [
        f"Paired test: WeAct-hard against each method on the same {n} test questions; the "
        "interval is a seeded paired bootstrap of the EM difference (2,000 resamples, "
        "`registry.paired`, the gate's), p an exact McNemar test; * marks p < 0.05. Per-kind "
        "intervals are Wilson's, the mean's a seeded bootstrap.",
        "",
        f"Power: an exact McNemar test at 0.05 needs at least {d} discordant questions all "
        f"one way, {bound}; at the discordance observed, the difference detected with 80 % "
        "power (normal approximation, never below that bound) is:",
        "",
    ]
    for method in [m for m in METHODS if m in rows and "p" in rows[m]]:
        r = rows[method]
        sig = "significant" if r["p"] < 0.05 else "not significant"
        k = int(r["discordant"])
        detectable = (
            f"detectable {max(r['mdd80'], 100 * d / n):.1f} points"
            if k
            else "no discordant question, nothing to detect from"
        )
        lines.append(
            f"- {LABELS[method]}: {k} discordant, {detectable}; "
            f"observed {0.0 - r['delta']:+.1f} ({sig})"
        )
    return lines


def _num(value: Any, fmt: str = ".3f") -> str:
    return "" if value is None else format(value, fmt)


def gate_lines(continual: Any) -> list[str]:
    lines = ["| Promotion | expected | gate | revision |", "|---|---|---|---|"]
    for p in continual.promotions:
        verdict = "passed" if p.passed else "**refused (409)**"
        expected = "pass" if p.expected else "refuse"
        lines.append(f"| {p.name} | {expected} | {verdict} | {p.revision or '-'} |")
    for p in continual.promotions:
        lines += ["", f"Gate report: {p.name}", ""]
        lines += ["| benchmark | baseline | candidate | delta | 95% CI | n | verdict | by |"]
        lines += ["|---|---|---|---|---|---|---|---|"]
        for c in p.report.get("checks", []):
            ci = (
                f"[{_num(c.get('ci_low'))}, {_num(c.get('ci_high'))}]"
                if c.get("ci_low") is not None
                else ""
            )
            lines.append(
                f"| {c['benchmark']} | {_num(c.get('baseline'))} | {_num(c.get('candidate'))} | "
                f"{_num(c.get('delta'), '+.3f')} | {ci} | {c.get('n') or ''} | {c['verdict']} | "
                f"{c.get('candidate_by') or ''} |"
            )
    return lines


def chart(rows: Mapping[str, Mapping[str, float]], path: Path) -> Path:
    """Grouped bars: EM % per question kind and the mean, one group per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = [m for m in METHODS if m in rows]
    series = [*KINDS, "mean"]
    width = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(11, 4.5))
    for i, kind in enumerate(series):
        xs = [n + (i - len(series) / 2 + 0.5) * width for n in range(len(methods))]
        ax.bar(xs, [rows[m].get(kind, 0.0) for m in methods], width, label=kind)
    ax.axhline(PAPER["weact_hard"], color="black", linestyle="--", linewidth=0.8,
               label="paper WeAct-hard 45.47")  # fmt: skip
    ax.set_xticks(range(len(methods)), [LABELS[m].split(" (")[0] for m in methods], fontsize=8)
    ax.set_ylabel("exact match, % of test questions")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=8, ncols=3)
    ax.set_title("reproduce: accuracy per method and question kind (test split)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_report(
    path: Path,
    rows: Mapping[str, Mapping[str, float]],
    continual: Any,
    run: Mapping[str, Any],
    cuts: Sequence[str],
    answers: Mapping[str, tuple[str, int, int]] | None = None,
    sequences: Sequence[str] = (),
    sections: Sequence[str] = (),
) -> Path:
    """`sections`: more markdown (efficiency, stage times), before what was cut."""
    lines = ["# make reproduce", ""]
    lines += [f"- {k}: {v}" for k, v in run.items()]
    lines += ["", "## Accuracy (exact match %, test split)", ""]
    lines += accuracy_table(rows)
    lines += ["", *power_lines(rows)]
    bad = degenerate(rows)
    lines += ["", "Methods at 0 % or 100 % on every kind: " + (", ".join(bad) or "none"), ""]
    lines += [f"![chart]({run.get('chart_file', 'reproduce.png')})", ""]
    lines += list(sequences)
    if answers:
        lines += ["What each method answered most often (whitespace collapsed):", ""]
        lines += answer_lines(answers) + [""]
    if continual is not None:
        lines += ["## Continual adaptation through the registry and the gate", ""]
        lines += gate_lines(continual)
        roots = continual.roots
        lines += ["", f"Roots kept (backbone and untouched adapters): **{continual.roots_ok}**"]
        lines += [
            f"- backbone root {roots.get('backbone')}",
            f"- revisions {roots.get('revisions')}",
        ]
        lines += [
            f"- head library roots {roots.get('head')}",
            f"- problems {roots.get('problems')}",
        ]
        lines += [f"- replay recorded at publish: {continual.replay}", ""]
    lines += [*sections, ""] if sections else []
    lines += ["## What was cut to fit the budget", ""]
    lines += [f"- {c}" for c in cuts]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
