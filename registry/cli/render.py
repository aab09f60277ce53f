"""The registry's tables for people: adapters, lineage, revisions, gate reports.

Built from `clikit.tables` (digests never fold: whole, or 12 characters and `…`); `--json`
prints the records instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from clikit.tables import fields, full, table, text
from registry.client import Adapter, GateCheck, GateReport, Lineage, Revision


def render_adapters(items: Sequence[Adapter], title: str | None = None) -> Table:
    out = table("id", "name", "label", "state", "rank", "parent", "manifest", "by", title=title)
    for a in items:
        out.add_row(
            str(a["id"]),
            a["name"],
            text(a["label"]),
            a["state"],
            str(a["rank"]),
            text(a.get("parent_name")),
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
            ("parent", a.get("parent_name")),
            ("rank / alpha", f"{a['rank']} / {a['alpha']}"),
            ("targets", ", ".join(a["target_modules"])),
            ("manifest", a["manifest_root"]),
            *((f"file {name}", digest) for name, digest in sorted(a["files"].items())),
            ("tags", " ".join(f"{k}={v}" for k, v in sorted(a.get("tags", {}).items())) or None),
            ("card", _card_head(a.get("card"))),
            ("created", f"{a['created_by']} at {a['created_at']}"),
            ("approved by", a.get("approved_by")),
            *_decision(a),
            *_provenance(a.get("provenance") or {}),
        ]
    )


def _decision(a: Adapter) -> list[tuple[str, Any]]:
    """The last decision when it is not the approval: who rejected or revoked it, and why."""
    if a["state"] not in ("rejected", "revoked") or not a.get("decided_by"):
        return []
    why = f": {a['reason']}" if a.get("reason") else " (no reason given)"
    return [(a["state"], f"by {a['decided_by']} at {a.get('decided_at')}{why}")]


def _provenance(p: dict[str, Any]) -> list[tuple[str, Any]]:
    """What the publisher stated of its training: data digests, seed, trainer, losses."""
    trainer = p.get("trainer") or {}
    settings = trainer.get("settings") or {}
    loss = (trainer.get("loss_first"), trainer.get("loss_last"))
    rows: list[tuple[str, Any]] = [
        *((f"data {i}", digest) for i, digest in enumerate(p.get("data_digests") or [], 1)),
        ("trained for", ", ".join(p.get("capabilities") or []) or None),
        ("base", trainer.get("backbone_root")),
        ("seed", p.get("seed")),
        ("hyper-params", " ".join(f"{k}={v}" for k, v in sorted(settings.items())) or None),
        ("steps", trainer.get("steps")),
        ("loss (NLL)", f"{loss[0]:.4f} -> {loss[1]:.4f}" if None not in loss else None),
        ("replay", "yes" if p.get("replay") else None),
        ("code", p.get("code_version")),
    ]
    if not any(value is not None for _, value in rows):
        return [("provenance", "not stated")]
    return rows


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
            text(a.get("parent_name")),
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
            *([("CANNOT RUN", _cannot_run(rev))] if rev.get("order_missing") else []),
            ("gate requires", ", ".join(rev.get("required_benchmarks") or []) or "-"),
            ("by", f"{rev['created_by']} at {rev['created_at']}"),
            *([("reason", rev["reason"])] if rev["reason"] else []),
        ]
    )
    out = table("capability", "adapter", "id", "manifest")
    for capability, entry in sorted(rev["library"].items()):
        manifest = full(entry["manifest_root"])
        out.add_row(capability, entry["name"], str(entry["adapter_id"]), manifest)
    return Group(head, out)


def _cannot_run(rev: Revision) -> str:
    missing = ", ".join(rev["order_missing"])
    return f"the hard order names {missing}, which the library has no adapter for"


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


def adapter_line(verb: str) -> Callable[[Adapter], Text]:
    """`approved write@2 (id 6, approved)`: a decision or push on one line."""

    def line(a: Adapter) -> Text:
        why = f": {a['reason']}" if verb in ("rejected", "revoked") and a.get("reason") else ""
        return Text(f"{verb} {a['name']} (id {a['id']}, {a['state']}){why}")

    return line


def tags_line(a: Adapter) -> Text:
    tags = " ".join(f"{k}={v}" for k, v in sorted(a.get("tags", {}).items()))
    return Text(f"{a['name']} tags: {tags or '(none)'}")


def revision_line(verb: str) -> Callable[[Revision], Text]:
    """`promoted prod r3: plan@1 search@1 write@2`."""

    def line(rev: Revision) -> Text:
        names = " ".join(entry["name"] for _, entry in sorted(rev["library"].items()))
        return Text(f"{verb} {rev['channel']} r{rev['revision']}: {names or '(empty library)'}")

    return line


def required_line(rev: Revision) -> Text:
    required = ", ".join(rev.get("required_benchmarks") or []) or "no benchmark"
    return Text(f"{rev['channel']}: every gate requires {required}")
