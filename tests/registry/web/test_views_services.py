"""The read models behind the pages, on SQLite and PostgreSQL (registry.services.page_models and
registry.services.page_queries), against the registry ``webworld`` populates through the API."""

from __future__ import annotations

from typing import Any

import pytest
from webworld import Site, counted

from registry.errors import InvalidError, NotFoundError
from registry.services import page_compare, page_models, page_queries, version_counts


def test_gate_reports_newest_first_and_filtered(any_site: Site) -> None:
    with any_site.api.db.read() as session:
        every = page_queries.list_gate_reports(session=session)
        refused = page_queries.list_gate_reports(session=session, passed=False)
        latest = page_queries.list_gate_reports(session=session, channel="prod", limit=1)
        other = page_queries.list_gate_reports(session=session, channel="staging")
    assert [(g.base_revision, g.report.passed) for g in every] == [
        (2, False),
        (1, True),
        (0, True),
    ]
    assert [g.id for g in refused] == [every[0].id]
    assert latest == every[:1]
    assert other == []
    check = every[0].report.checks[0]
    assert (check.benchmark, check.baseline, check.candidate, check.verdict) == (
        "write-quality",
        0.86,
        0.5,
        "fail",
    )
    assert every[0].created_by == "bob"


def test_newest_events_page_backwards(any_site: Site) -> None:
    with any_site.api.db.read() as session:
        newest = page_queries.newest_events(session=session, limit=5)
        older = page_queries.newest_events(session=session, before=newest[-1].id, limit=5)
        log = page_models.audit_log(session=session, before=None, limit=5)
        with pytest.raises(InvalidError):
            page_queries.newest_events(session=session, limit=0)
    ids = [e.id for e in newest + older]
    assert ids == sorted(ids, reverse=True)
    assert len(set(ids)) == 10
    assert newest[0].action == "node.report"
    assert log.events == newest
    assert log.older == newest[-1].id
    assert log.chain.ok


def test_counts_lag_and_comparisons(any_site: Site) -> None:
    ids = any_site.ids
    beat = {"channel": "gone", "revision": 4, "audit": {"ok": False, "detail": "mismatch"}}
    any_site.api.ok("POST", "/nodes/node-2/heartbeat", "node2", json=beat)
    with any_site.api.db.read() as session:
        counts = version_counts.counts(session=session)
        statuses = {s.node.id: s for s in page_models.node_statuses(session=session)}
        detail = page_models.adapter_detail(session=session, adapter_id=ids["write@2"])
        pair = page_models.comparison(session=session, channel="prod", before=None, after=None)
        with pytest.raises(NotFoundError, match="no revision 7"):
            page_models.comparison(session=session, channel="prod", before=1, after=7)
        with pytest.raises(NotFoundError):
            page_models.channel_detail(session=session, name="staging")
    assert counts == {
        "plan": {"approved": 1},
        "search": {"approved": 1},
        "write": {"approved": 3, "candidate": 1},
    }
    assert (statuses["node-1"].head, statuses["node-1"].lag) == (2, 1)
    assert (statuses["node-2"].head, statuses["node-2"].lag) == (None, None)
    assert [r.channel for r in detail.serving] == ["prod"]
    assert [e.score for e in detail.evaluations] == [0.86]
    assert [a.name for a in detail.lineage.descendants] == ["write@3"]
    assert (pair.before.revision, pair.after.revision) == (1, 2)


def test_scores_names_compare_and_filtered_events(any_site: Site) -> None:
    """The reads behind the chart, the parents' names, the compare view and the audit
    filters, on both databases."""
    ids = any_site.ids
    store = any_site.api.store
    with any_site.api.db.read() as session:
        series = page_queries.score_series(session=session, adapter_id=ids["write@3"])
        pair = page_compare.compare_adapters(
            session=session, store=store, left_id=ids["write@2"], right_id=ids["write@3"]
        )
        line = page_models.adapter_detail(session=session, adapter_id=ids["write@3"]).lineage
        approvals = page_queries.newest_events(session=session, action="adapter.approve")
        family = page_queries.newest_events(session=session, action="channel.")
        bob = page_queries.newest_events(session=session, actor="bob", subject="channel:prod")
    points = series["write-quality@1"]
    assert [(p.version, p.score) for p in points] == [(1, 0.8), (2, 0.86), (3, 0.5)]
    assert [a.name for a in line.ancestors] == ["write@1", "write@2"]  # oldest first
    parent = {row.field: row for row in pair.config}["parent"]
    assert (parent.left, parent.right, parent.same) == ("write@1", "write@2", False)
    assert pair.tensors
    assert all(t.change == "changed" for t in pair.tensors)
    score = pair.scores[0]
    assert (score.benchmark, score.left, score.right) == ("write-quality@1", 0.86, 0.5)
    assert score.delta == pytest.approx(-0.36)
    assert {e.action for e in approvals} == {"adapter.approve"}
    assert len(approvals) == 5
    assert family
    assert all(e.action.startswith("channel.") for e in family)
    assert bob
    assert all((e.actor, e.subject) == ("bob", "channel:prod") for e in bob)


def test_parents_are_named_from_the_version_rows(any_site: Site) -> None:
    """The adapters listing and the overview name each parent from its version's row (its
    ``parent_name``, read in the same SELECT): versions with parents cost no query more."""

    def listing(session: Any, capability: str) -> page_models.AdapterListing:
        return page_models.adapter_listing(
            session=session, capability=capability, backbone=None, state=None, limit=50, offset=0
        )

    with any_site.api.db.read() as session:
        listing(session, "plan")  # the first read of the session, outside the counts
        with counted(any_site) as without_parents:
            listing(session, "plan")
        with counted(any_site) as with_parents:
            write = listing(session, "write")
        overview = page_models.overview(session=session)
    assert len(with_parents) == len(without_parents), with_parents
    assert {a.name: a.parent_name for a in write.page.items} == {
        "write@1": None,
        "write@2": "write@1",
        "write@3": "write@2",
        "write@4": "write@1",
    }
    assert [(a.name, a.parent_name) for a in overview.candidates.items] == [("write@4", "write@1")]
