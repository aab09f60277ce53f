"""Tables for people: adapters, lineage, revisions, gate reports, and generic rows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Group
from rich.table import Table

from registry.client import Adapter, GateCheck, GateReport, Lineage, Revision

DIGESTS = {"manifest", "library", "backbone", "root", "digest",
           "dataset_digest", "library_digest"}  # fmt: skip
"""Columns that hold a digest: shown whole, folded (never cut) in a narrow terminal."""


def full(digest: str | None) -> str:
    return digest or "-"


def table(*columns: str, title: str | None = None, caption: str | None = None) -> Table:
    """A table whose digest columns are never cut (`overflow="fold"`, no ellipsis)."""
    made = Table(title=title, caption=caption)
    for column in columns:
        digest = column in DIGESTS
        made.add_column(column, overflow="fold" if digest else "ellipsis", min_width=8)
    return made


def text(value: Any) -> str:
    return "-" if value is None else str(value)


def fields(pairs: Sequence[tuple[str, Any]]) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    for key, value in pairs:
        grid.add_row(key, text(value))
    return grid


def render_adapters(items: Sequence[Adapter], title: str | None = None) -> Table:
    out = table("id", "name", "label", "state", "rank", "parent", "manifest", "by", title=title)
    for a in items:
        out.add_row(
            str(a["id"]),
            a["name"],
            text(a["label"]),
            a["state"],
            str(a["rank"]),
            text(a["parent_id"]),
            full(a["manifest_root"]),
            a["created_by"],
        )
    return out


def render_adapter(a: Adapter) -> Table:
    return fields(
        [
            ("id", a["id"]),
            ("name", a["name"]),
            ("label", a["label"]),
            ("state", a["state"]),
            ("backbone", a["backbone"]),
            ("parent", a["parent_id"]),
            ("rank / alpha", f"{a['rank']} / {a['alpha']}"),
            ("targets", ", ".join(a["target_modules"])),
            ("manifest", a["manifest_root"]),
            *((f"file {name}", digest) for name, digest in sorted(a["files"].items())),
            ("tags", " ".join(f"{k}={v}" for k, v in sorted(a.get("tags", {}).items())) or None),
            ("card", _card_head(a.get("card"))),
            ("created", f"{a['created_by']} at {a['created_at']}"),
        ]
    )


def _card_head(card: str | None) -> str | None:
    """The model card's first non-empty line and its length (the whole card: --json)."""
    if not card:
        return None
    lines = card.splitlines()
    first = next((line.strip() for line in lines if line.strip()), "")
    return f"{first} ({len(lines)} lines)"


def render_lineage(lineage: Lineage) -> Table:
    rows = [("ancestor", a) for a in lineage["ancestors"]]
    rows += [("this", lineage["adapter"])] + [("descendant", a) for a in lineage["descendants"]]
    columns = ("relation", "id", "name", "label", "state", "parent", "manifest")
    out = table(*columns, title=f"lineage of {lineage['adapter']['name']}")
    for relation, a in rows:
        out.add_row(
            relation,
            str(a["id"]),
            a["name"],
            text(a["label"]),
            a["state"],
            text(a["parent_id"]),
            full(a["manifest_root"]),
        )
    return out


def render_revision(rev: Revision) -> Group:
    head = fields(
        [
            ("channel", f"{rev['channel']} r{rev['revision']}"),
            ("library", rev["library_digest"]),
            ("backbone", rev["backbone"]),
            ("order", ",".join(rev["order"]) or "-"),
            ("by", f"{rev['created_by']} at {rev['created_at']}"),
            *([("reason", rev["reason"])] if rev["reason"] else []),
        ]
    )
    out = table("capability", "adapter", "id", "manifest")
    for capability, entry in sorted(rev["library"].items()):
        out.add_row(capability, entry["name"], str(entry["adapter_id"]), entry["manifest_root"])
    return Group(head, out)


def render_revisions(revs: Sequence[Revision]) -> Table:
    out = table("channel", "revision", "library", "adapters", "order", "by", "reason")
    for rev in revs:
        out.add_row(
            rev["channel"],
            str(rev["revision"]),
            full(rev["library_digest"]),
            " ".join(entry["name"] for _, entry in sorted(rev["library"].items())),
            ",".join(rev["order"]) or "-",
            rev["created_by"],
            text(rev["reason"]),
        )
    return out


def _interval(check: GateCheck) -> str:
    low, high = check.get("ci_low"), check.get("ci_high")
    if low is None or high is None:
        return "-"
    return f"[{low:+.4f}, {high:+.4f}]"


def _number(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else text(value)


def render_gate(report: GateReport) -> Table:
    """One row per benchmark: baseline, candidate, delta and its interval, n, who evaluated."""
    table = Table(title=f"gate: {'passed' if report['passed'] else 'FAILED'}")
    columns = ("benchmark", "scope", "baseline", "candidate", "delta", "interval", "n", "tol")
    for column in (*columns, "verdict", "evaluated by"):
        table.add_column(column)
    for check in report["checks"]:
        who = {check.get("baseline_by"), check.get("candidate_by")} - {None}
        table.add_row(
            f"{check['benchmark']}@{check['version']}",
            check["scope"],
            *(_number(check[key]) for key in ("baseline", "candidate", "delta")),
            _interval(check),
            text(check.get("n")),
            text(check["tolerance"]),
            check["verdict"] + (f" ({check['detail']})" if check.get("detail") else ""),
            ", ".join(sorted(str(w) for w in who)) or "-",
        )
    return table


def render_rows(
    rows: Sequence[Mapping[str, Any]], columns: Sequence[str], title: str | None = None
) -> Table:
    out = table(*columns, title=title)
    for row in rows:
        out.add_row(*(text(row.get(column)) for column in columns))
    return out
