"""The promotion gate, as pure logic: old benchmarks must not regress.

For each benchmark in scope the candidate's score is compared with the baseline's:
``higher`` is better -> pass when ``candidate - baseline >= -tolerance``;
``lower`` is better -> pass when ``candidate - baseline <= tolerance``.
No candidate evaluation -> ``missing`` (fails); no baseline -> ``no_baseline`` (passes).
"""

from __future__ import annotations

from collections.abc import Iterable

from registry.domain import Benchmark, GateCheck, GateReport

PASSING = frozenset({"pass", "no_baseline"})


def judge(benchmark: Benchmark, baseline: float | None, candidate: float | None) -> GateCheck:
    """One benchmark's verdict."""
    delta = None if baseline is None or candidate is None else candidate - baseline
    if candidate is None:
        verdict = "missing"
    elif delta is None:
        verdict = "no_baseline"
    elif benchmark.direction == "higher":
        verdict = "pass" if delta >= -benchmark.tolerance else "fail"
    else:
        verdict = "pass" if delta <= benchmark.tolerance else "fail"
    return GateCheck(
        benchmark=benchmark.name,
        version=benchmark.version,
        scope=benchmark.scope,
        baseline=baseline,
        candidate=candidate,
        delta=delta,
        tolerance=benchmark.tolerance,
        verdict=verdict,
    )


def report(checks: Iterable[GateCheck]) -> GateReport:
    """The gate passes when every check passes (an empty gate passes)."""
    items = list(checks)
    return GateReport(passed=all(c.verdict in PASSING for c in items), checks=items)
