"""A benchmark's score across versions, laid out for a server-rendered SVG line chart.

x is the version number (first to last version scored), y the score (the scored range,
padded; a flat series gets a range of its own). The SVG scales to its container (viewBox),
so the same chart fits a phone and a desktop; each point carries its version and score.
"""

from __future__ import annotations

from dataclasses import dataclass

from registry.services.page_queries import ScorePoint

WIDTH = 640
HEIGHT = 220
LEFT = 52
RIGHT = 16
TOP = 14
BOTTOM = 34
TICKS = 4


@dataclass(frozen=True)
class ChartPoint:
    x: float
    y: float
    point: ScorePoint
    current: bool


@dataclass(frozen=True)
class Tick:
    at: float
    label: str


@dataclass(frozen=True)
class Chart:
    benchmark: str
    points: list[ChartPoint]
    line: str
    y_ticks: list[Tick]
    x_ticks: list[Tick]
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    right: int = WIDTH - RIGHT
    top: int = TOP
    bottom: int = HEIGHT - BOTTOM


def _range(scores: list[float]) -> tuple[float, float]:
    low, high = min(scores), max(scores)
    if high == low:
        pad = abs(low) * 0.1 or 0.5
        return low - pad, high + pad
    pad = (high - low) * 0.08
    return low - pad, high + pad


def _version_ticks(first: int, last: int) -> list[int]:
    if last - first < TICKS:
        return list(range(first, last + 1))
    step = -(-(last - first) // TICKS)
    return [*range(first, last, step), last]


def score_chart(benchmark: str, series: list[ScorePoint], current: int) -> Chart:
    """Lay out ``series`` (sorted by version); ``current`` is the page's version id."""
    first, last = series[0].version, series[-1].version
    low, high = _range([p.score for p in series])
    span_x = (WIDTH - RIGHT) - LEFT
    span_y = (HEIGHT - BOTTOM) - TOP

    def x_of(version: int) -> float:
        return LEFT + (span_x / 2 if last == first else span_x * (version - first) / (last - first))

    def y_of(score: float) -> float:
        return TOP + span_y * (high - score) / (high - low)

    points = [
        ChartPoint(round(x_of(p.version), 1), round(y_of(p.score), 1), p, p.adapter_id == current)
        for p in series
    ]
    line = " ".join(f"{p.x},{p.y}" for p in points)
    y_ticks = [
        Tick(
            round(y_of(low + (high - low) * i / TICKS), 1), f"{low + (high - low) * i / TICKS:.3g}"
        )
        for i in range(TICKS + 1)
    ]
    x_ticks = [Tick(round(x_of(v), 1), f"v{v}") for v in _version_ticks(first, last)]
    return Chart(benchmark, points, line, y_ticks, x_ticks)


def score_charts(scores: dict[str, list[ScorePoint]], current: int) -> list[Chart]:
    """One chart per benchmark with a score."""
    return [score_chart(name, series, current) for name, series in scores.items() if series]
