"""Tables for people: adapters, lineage, revisions, gate reports, and generic rows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.table import Table

from registry.client import Adapter, GateReport, Lineage, Revision


def short(digest: str | None, n: int = 12) -> str:
    return digest[:n] if digest else "-"


def text(value: Any) -> str:
    return "-" if value is None else str(value)


def fields(pairs: Sequence[tuple[str, Any]]) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    for key, value in pairs:
        grid.add_row(key, text(value))
    return grid


def render_adapters(items: Sequence[Adapter], title: str | None = None) -> Table:
    table = Table(title=title)
    for column in ("id", "name", "label", "state", "rank", "parent", "manifest", "by"):
        table.add_column(column)
    for a in items:
        table.add_row(
            str(a["id"]),
            a["name"],
            text(a["label"]),
            a["state"],
            str(a["rank"]),
            text(a["parent_id"]),
            short(a["manifest_root"]),
            a["created_by"],
        )
    return table


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
            ("created", f"{a['created_by']} at {a['created_at']}"),
        ]
    )


def render_lineage(lineage: Lineage) -> Table:
    rows = [("ancestor", a) for a in lineage["ancestors"]]
    rows += [("this", lineage["adapter"])] + [("descendant", a) for a in lineage["descendants"]]
    table = Table(title=f"lineage of {lineage['adapter']['name']}")
    for column in ("relation", "id", "name", "label", "state", "parent", "manifest"):
        table.add_column(column)
    for relation, a in rows:
        table.add_row(
            relation,
            str(a["id"]),
            a["name"],
            text(a["label"]),
            a["state"],
            text(a["parent_id"]),
            short(a["manifest_root"]),
        )
    return table


def render_revision(rev: Revision) -> Table:
    table = Table(
        title=f"{rev['channel']} r{rev['revision']}  library {short(rev['library_digest'])}"
        f"  backbone {short(rev['backbone'])}  order {','.join(rev['order']) or '-'}",
        caption=f"by {rev['created_by']} at {rev['created_at']}"
        + (f": {rev['reason']}" if rev["reason"] else ""),
    )
    for column in ("capability", "adapter", "id", "manifest"):
        table.add_column(column)
    for capability, entry in sorted(rev["library"].items()):
        table.add_row(capability, entry["name"], str(entry["adapter_id"]), entry["manifest_root"])
    return table


def render_revisions(revs: Sequence[Revision]) -> Table:
    table = Table()
    for column in ("channel", "revision", "library", "adapters", "order", "by", "reason"):
        table.add_column(column)
    for rev in revs:
        table.add_row(
            rev["channel"],
            str(rev["revision"]),
            short(rev["library_digest"]),
            " ".join(entry["name"] for _, entry in sorted(rev["library"].items())),
            ",".join(rev["order"]) or "-",
            rev["created_by"],
            text(rev["reason"]),
        )
    return table


def render_gate(report: GateReport) -> Table:
    table = Table(title=f"gate: {'passed' if report['passed'] else 'FAILED'}")
    for column in ("benchmark", "version", "scope", "baseline", "candidate", "delta", "tol"):
        table.add_column(column)
    table.add_column("verdict")
    for check in report["checks"]:
        table.add_row(
            check["benchmark"],
            str(check["version"]),
            check["scope"],
            *(text(check[key]) for key in ("baseline", "candidate", "delta", "tolerance")),
            check["verdict"],
        )
    return table


def render_rows(
    rows: Sequence[Mapping[str, Any]], columns: Sequence[str], title: str | None = None
) -> Table:
    table = Table(title=title)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(text(row.get(column)) for column in columns))
    return table
