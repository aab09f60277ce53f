"""The promotion gate, as pure logic: old benchmarks must not regress.

For each benchmark in scope, the candidate's trusted evaluation is compared with the
baseline's:

- Both carry per-item scores -> **paired bootstrap**: items are paired by id, the interval
  of the mean difference ``candidate - baseline`` is computed (`registry.paired`, seeded by
  the gate seed, the benchmark and its version) and the check fails only when the regression
  is both *significant* (the interval excludes 0 on the worse side) and *larger than the
  tolerance* (the mean difference is worse than ``tolerance``). Different item sets ->
  ``mismatch`` (fails).
- Either lacks items -> **point** comparison: ``higher`` passes when ``delta >= -tolerance``,
  ``lower`` when ``delta <= tolerance``.
- No candidate evaluation -> ``missing`` (fails); no baseline -> ``no_baseline`` (passes).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from registry.domain import Benchmark, GateCheck, GateReport, Scored
from registry.paired import ItemMismatchError, paired_bootstrap

PASSING = frozenset({"pass", "no_baseline"})


@dataclass(frozen=True)
class GateSettings:
    seed: str = "weact-gate"
    resamples: int = 2000
    confidence: float = 0.95


DEFAULT_SETTINGS = GateSettings()


def _worse(benchmark: Benchmark, amount: float) -> float:
    """How much worse a difference is (positive: a regression), whatever the direction."""
    return -amount if benchmark.direction == "higher" else amount


def _check(benchmark: Benchmark, verdict: str, **fields: object) -> GateCheck:
    return GateCheck(
        benchmark=benchmark.name,
        version=benchmark.version,
        scope=benchmark.scope,
        tolerance=benchmark.tolerance,
        verdict=verdict,
        **fields,  # type: ignore[arg-type]
    )


def _sides(baseline: Scored | None, candidate: Scored | None) -> dict[str, object]:
    return {
        "baseline_evaluation": baseline.evaluation_id if baseline else None,
        "candidate_evaluation": candidate.evaluation_id if candidate else None,
        "baseline_by": baseline.evaluated_by if baseline else None,
        "candidate_by": candidate.evaluated_by if candidate else None,
    }


def _point(benchmark: Benchmark, baseline: Scored, candidate: Scored) -> GateCheck:
    delta = candidate.score - baseline.score
    verdict = "fail" if _worse(benchmark, delta) > benchmark.tolerance else "pass"
    return _check(
        benchmark,
        verdict,
        baseline=baseline.score,
        candidate=candidate.score,
        delta=delta,
        test="point",
        detail="an evaluation without per-item scores: point comparison",
        **_sides(baseline, candidate),
    )


def _paired(
    benchmark: Benchmark,
    baseline: Scored,
    candidate: Scored,
    items: tuple[dict[str, float], dict[str, float]],
    settings: GateSettings,
) -> GateCheck:
    sides = _sides(baseline, candidate)
    try:
        result = paired_bootstrap(
            *items,
            seed=f"{settings.seed}:{benchmark.name}:{benchmark.version}",
            resamples=settings.resamples,
            confidence=settings.confidence,
        )
    except ItemMismatchError as exc:
        return _check(
            benchmark,
            "mismatch",
            baseline=baseline.score,
            candidate=candidate.score,
            delta=candidate.score - baseline.score,
            test="paired_bootstrap",
            detail=str(exc),
            **sides,
        )
    bounds = (_worse(benchmark, result.ci_low), _worse(benchmark, result.ci_high))
    significant = min(bounds) > 0  # the whole interval lies on the worse side of 0
    too_large = _worse(benchmark, result.delta) > benchmark.tolerance
    return _check(
        benchmark,
        "fail" if significant and too_large else "pass",
        baseline=result.baseline,
        candidate=result.candidate,
        delta=result.delta,
        test="paired_bootstrap",
        n=result.n,
        ci_low=result.ci_low,
        ci_high=result.ci_high,
        **sides,
    )


def judge(
    benchmark: Benchmark,
    baseline: Scored | None,
    candidate: Scored | None,
    settings: GateSettings = DEFAULT_SETTINGS,
    *,
    detail: str | None = None,
) -> GateCheck:
    """One benchmark's verdict; `detail` says why an evaluation is missing, if it is."""
    if candidate is None:
        base = baseline.score if baseline else None
        return _check(
            benchmark,
            "missing",
            baseline=base,
            candidate=None,
            delta=None,
            detail=detail,
            **_sides(baseline, None),
        )
    if baseline is None:
        return _check(
            benchmark,
            "no_baseline",
            baseline=None,
            candidate=candidate.score,
            delta=None,
            detail=detail,
            **_sides(None, candidate),
        )
    if baseline.items is None or candidate.items is None:
        return _point(benchmark, baseline, candidate)
    return _paired(benchmark, baseline, candidate, (baseline.items, candidate.items), settings)


def report(
    checks: Iterable[GateCheck],
    settings: GateSettings = DEFAULT_SETTINGS,
    *,
    library_digest: str | None = None,
    baseline_library_digest: str | None = None,
) -> GateReport:
    """The gate passes when every check passes (an empty gate passes)."""
    items = list(checks)
    return GateReport(
        passed=all(c.verdict in PASSING for c in items),
        checks=items,
        library_digest=library_digest,
        baseline_library_digest=baseline_library_digest,
        seed=settings.seed,
        resamples=settings.resamples,
        confidence=settings.confidence,
    )
