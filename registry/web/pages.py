"""The read-only pages: any signed-in role sees them; each calls one service function.

/                         overview: counts, channel heads, candidates, nodes, audit
/capabilities             capabilities (versions by state) and backbones
/adapters                 versions, filtered by capability, backbone and state
/adapters/{id}            one version: state, provenance, manifest root, lineage graph
/channels                 channel heads
/channels/{name}          library, revision history, nodes, gate reports
/channels/{name}/diff     what changed between two revisions (?from=&to=)
/gates                    recorded gate reports (?channel=&outcome=passed|refused)
/nodes                    runtime nodes: revision served, lag, audit
/audit                    the audit chain's verification and its events (?before=)
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from starlette.responses import Response

from registry.api.deps import StateDep
from registry.api.schemas import MAX_DB_INT
from registry.domain import AdapterState
from registry.errors import InvalidError
from registry.names import check_name
from registry.services import adapter_names, page_models, page_queries
from registry.web.deps import Viewer
from registry.web.diff import diff_revisions, history
from registry.web.lineage import lineage_graph
from registry.web.render import page
from registry.web.routing import PageRoute

router = APIRouter(route_class=PageRoute, include_in_schema=False)

PER_PAGE = 50
EVENTS_PER_PAGE = 50
Number = Annotated[int, Path(ge=1, le=MAX_DB_INT)]
AdapterName = Annotated[str, Path(max_length=80)]
Optional = Annotated[int | None, Query(ge=1, le=MAX_DB_INT)]

NOTICES = {
    "approve": "Approved.",
    "reject": "Rejected.",
    "revoke": "Revoked, and taken out of every channel that served it.",
    "promote": "Promoted: a new revision is the channel's head.",
    "rollback": "Rolled back: a new revision equal to the earlier one is the head.",
}


def _blank(value: str | None) -> str | None:
    """A filter left at "any" in a form arrives as an empty string."""
    return value or None


@router.get("/")
def overview(request: Request, state: StateDep, user: Viewer) -> Response:
    with state.db.read() as session:
        data = page_models.overview(session=session)
    return page(request, "overview.html", user=user, data=data)


@router.get("/capabilities")
def capabilities(request: Request, state: StateDep, user: Viewer) -> Response:
    with state.db.read() as session:
        data = page_models.catalog(session=session)
    return page(request, "capabilities.html", user=user, data=data)


@router.get("/adapters")
def adapters(
    request: Request,
    state: StateDep,
    user: Viewer,
    capability: str | None = None,
    backbone: str | None = None,
    adapter_state: Annotated[str | None, Query(alias="state")] = None,
    page_number: Annotated[int, Query(alias="page", ge=1, le=MAX_DB_INT // PER_PAGE)] = 1,
) -> Response:
    filters = {"capability": _blank(capability), "backbone": _blank(backbone)}
    filters["state"] = _blank(adapter_state)
    with state.db.read() as session:
        data = page_models.adapter_listing(
            session=session, limit=PER_PAGE, offset=(page_number - 1) * PER_PAGE, **filters
        )
    last = max(1, -(-data.page.total // PER_PAGE))
    return page(
        request,
        "adapters.html",
        user=user,
        data=data,
        filters=filters,
        states=[s.value for s in AdapterState],
        page_number=page_number,
        last_page=last,
    )


@router.get("/adapters/{name}")
def adapter(
    request: Request, name: AdapterName, state: StateDep, user: Viewer, done: str | None = None
) -> Response:
    """One version, by the name people use (`/adapters/write@2`) or by id (`/adapters/6`)."""
    with state.db.read() as session:
        adapter_id = adapter_names.find_named_row(session, name).id
        data = page_models.adapter_detail(session=session, adapter_id=adapter_id)
    return page(
        request,
        "adapter.html",
        user=user,
        data=data,
        graph=lineage_graph(data.lineage),
        notice=NOTICES.get(done or ""),
    )


@router.get("/channels")
def channels(request: Request, state: StateDep, user: Viewer) -> Response:
    with state.db.read() as session:
        data = page_models.channel_summaries(session=session)
    return page(request, "channels.html", user=user, data=data)


@router.get("/channels/{name}")
def channel(
    request: Request, name: str, state: StateDep, user: Viewer, done: str | None = None
) -> Response:
    check_name("channel", name)
    with state.db.read() as session:
        data = page_models.channel_detail(session=session, name=name)
    return page(
        request,
        "channel.html",
        user=user,
        data=data,
        history=history(data.revisions),
        notice=NOTICES.get(done or ""),
    )


@router.get("/channels/{name}/diff")
def channel_diff(
    request: Request,
    name: str,
    state: StateDep,
    user: Viewer,
    before: Annotated[int | None, Query(alias="from", ge=1, le=MAX_DB_INT)] = None,
    after: Annotated[int | None, Query(alias="to", ge=1, le=MAX_DB_INT)] = None,
) -> Response:
    check_name("channel", name)
    with state.db.read() as session:
        data = page_models.comparison(session=session, channel=name, before=before, after=after)
    diff = diff_revisions(data.before, data.after)
    return page(request, "diff.html", user=user, data=data, diff=diff, channel=name)


@router.get("/gates")
def gates(
    request: Request,
    state: StateDep,
    user: Viewer,
    channel: str | None = None,
    outcome: str | None = None,
) -> Response:
    outcomes = {None: None, "passed": True, "refused": False}
    if _blank(outcome) not in outcomes:
        raise InvalidError(f"outcome must be one of {sorted(k for k in outcomes if k)}")
    name = _blank(channel)
    with state.db.read() as session:
        data = page_queries.list_gate_reports(
            session=session, channel=name, passed=outcomes[_blank(outcome)], limit=100
        )
    return page(request, "gates.html", user=user, data=data, channel=name, outcome=_blank(outcome))


@router.get("/nodes")
def nodes(request: Request, state: StateDep, user: Viewer) -> Response:
    with state.db.read() as session:
        data = page_models.node_statuses(session=session)
    return page(request, "nodes.html", user=user, data=data)


@router.get("/audit")
def audit(request: Request, state: StateDep, user: Viewer, before: Optional = None) -> Response:
    with state.db.read() as session:
        data = page_models.audit_log(session=session, before=before, limit=EVENTS_PER_PAGE)
    return page(request, "audit.html", user=user, data=data)
