"""The read-only pages: any signed-in role sees them; each calls one service function.

/                         overview: counts, channel heads, candidates, nodes, audit
/capabilities             capabilities (versions by state) and backbones
/                         (?waiting=N: the page of candidates awaiting a decision)
/adapters                 versions: filters (capability, backbone, state), search (q: text
                          of the model card, tag=KEY=VALUE, label), sort, page numbers
/adapters/{id}            one version: state, files (sizes, downloads, the pull command),
                          provenance, lineage graph, model card, scores across versions
/channels                 channel heads
/channels/{name}          library, revision history, nodes, gate reports
/channels/{name}/diff     what changed between two revisions (?from=&to=)
/gates                    recorded gate reports (?channel=&outcome=passed|refused)
/nodes                    runtime nodes: revision served, lag, audit
/audit                    the audit chain's verification and its events (?before=, and
                          filters: action= (``adapter.`` for a family), actor=, subject=)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from starlette.responses import Response

from registry.api.deps import StateDep
from registry.api.schemas import MAX_DB_INT
from registry.domain import AdapterState, AdapterVersion
from registry.errors import InvalidError
from registry.names import check_name
from registry.services import adapter_names, page_compare, page_models, page_queries, trust_roots
from registry.services.adapter_list import KEYSET_SORTS
from registry.web.chart import score_charts
from registry.web.deps import Viewer
from registry.web.diff import diff_revisions, history
from registry.web.lineage import lineage_graph
from registry.web.markdown import render_card
from registry.web.paging import Cursor, pager, query_url
from registry.web.render import page
from registry.web.routing import PageRoute

router = APIRouter(route_class=PageRoute, include_in_schema=False)

PER_PAGE = 50
EVENTS_PER_PAGE = 50
Number = Annotated[int, Path(ge=1, le=MAX_DB_INT)]
PageNumber = Annotated[int, Query(ge=1, le=MAX_DB_INT // PER_PAGE)]
SORTS = {
    "oldest": "oldest first",
    "newest": "newest first",
    "name": "name (capability, version)",
    "state": "state",
    "label": "label",
}
AdapterName = Annotated[str, Path(max_length=80)]
Optional = Annotated[int | None, Query(ge=1, le=MAX_DB_INT)]

NOTICES = {
    "approve": "Approved.",
    "reject": "Rejected.",
    "revoke": "Revoked, and taken out of every channel that served it.",
    "promote": "Promoted: a new revision is the channel's head.",
    "rollback": "Rolled back: a new revision equal to the earlier one is the head.",
    "tag": "Tags saved.",
}


def _blank(value: str | None) -> str | None:
    """A filter left at "any" in a form arrives as an empty string."""
    return value or None


@router.get("/")
def overview(request: Request, state: StateDep, user: Viewer, waiting: PageNumber = 1) -> Response:
    with state.db.read() as session:
        data = page_models.overview(session=session, waiting_page=waiting)
        trust = trust_roots.trust_status(session=session, strict=state.settings.strict)
    pages = pager(
        waiting,
        data.candidates.total,
        page_models.WAITING_PER_PAGE,
        lambda n: query_url("/", {}, waiting=n) + "#waiting",
        exact=data.candidates.total_exact,
        more=len(data.candidates.items) == page_models.WAITING_PER_PAGE,
    )
    return page(request, "overview.html", user=user, data=data, pager=pages, trust=trust)


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
    q: Annotated[str | None, Query(max_length=256)] = None,
    tag: Annotated[list[str] | None, Query(max_length=320)] = None,
    label: Annotated[str | None, Query(max_length=128)] = None,
    sort: Annotated[str | None, Query(max_length=16)] = None,
    page_number: Annotated[int, Query(alias="page", ge=1, le=MAX_DB_INT // PER_PAGE)] = 1,
    after: Optional = None,
    before: Optional = None,
) -> Response:
    """Page numbers up to what the count reaches; previous and next by key in the oldest
    and newest orders (`after=`/`before=` an id on the page), by number in the others."""
    filters: dict[str, str | None] = {
        "capability": _blank(capability),
        "backbone": _blank(backbone),
        "state": _blank(adapter_state),
        "q": _blank(q and q.strip()),
        "label": _blank(label),
        "sort": _blank(sort),
    }
    tags = [t.strip() for t in tag or [] if t.strip()]
    keyset = (filters["sort"] or "oldest") in KEYSET_SORTS
    after, before = (after, None if after is not None else before) if keyset else (None, None)
    with state.db.read() as session:
        data = page_models.adapter_listing(
            session=session,
            capability=filters["capability"],
            backbone=filters["backbone"],
            state=filters["state"],
            limit=PER_PAGE,
            offset=0 if after or before else (page_number - 1) * PER_PAGE,
            tags=tags,
            label=filters["label"],
            text=filters["q"],
            sort=filters["sort"] or "oldest",
            after=after,
            before=before,
        )
    params = {**filters, "tag": tags}
    pages = pager(
        page_number,
        data.page.total,
        PER_PAGE,
        lambda n: query_url("/adapters", params, page=n),
        exact=data.page.total_exact,
        more=data.more,
        cursor=_cursor(params, page_number, data.page.items, data.more) if keyset else None,
    )
    return page(
        request,
        "adapters.html",
        user=user,
        data=data,
        filters=filters,
        tags=tags,
        states=[s.value for s in AdapterState],
        sorts=SORTS,
        pager=pages,
    )


def _cursor(
    params: Mapping[str, str | list[str] | None],
    number: int,
    items: list[AdapterVersion],
    more: bool,
) -> Cursor:
    """The previous and next pages by key: before this page's first id, after its last."""
    if not items:
        return Cursor(query_url("/adapters", params) if number > 1 else None, None)
    previous = None
    if number == 2:
        previous = query_url("/adapters", params)
    elif number > 2:
        previous = query_url("/adapters", params, page=number - 1, before=items[0].id)
    following = query_url("/adapters", params, page=number + 1, after=items[-1].id)
    return Cursor(previous, following if more else None)


@router.get("/adapters/{name}")
def adapter(
    request: Request, name: AdapterName, state: StateDep, user: Viewer, done: str | None = None
) -> Response:
    """One version, by the name people use (`/adapters/write@2`) or by id (`/adapters/6`)."""
    with state.db.read() as session:
        adapter_id = adapter_names.find_named_row(session, name).id
        data = page_models.adapter_detail(session=session, adapter_id=adapter_id)
        extras = page_compare.adapter_extras(
            session=session, store=state.store, adapter=data.adapter
        )
    a = data.adapter
    return page(
        request,
        "adapter.html",
        user=user,
        data=data,
        graph=lineage_graph(data.lineage),
        sizes=extras.sizes,
        charts=score_charts(extras.scores, data.adapter.id),
        card=render_card(data.adapter.card) if data.adapter.card else None,
        pull=f"weact adapter pull {a.id} --to {a.capability}-{a.version}",
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
def audit(
    request: Request,
    state: StateDep,
    user: Viewer,
    before: Optional = None,
    action: Annotated[str | None, Query(max_length=64)] = None,
    actor: Annotated[str | None, Query(max_length=128)] = None,
    subject: Annotated[str | None, Query(max_length=200)] = None,
) -> Response:
    filters = {"action": _blank(action), "actor": _blank(actor), "subject": _blank(subject)}
    with state.db.read() as session:
        data = page_models.audit_log(
            session=session, before=before, limit=EVENTS_PER_PAGE, **filters
        )
    older = query_url("/audit", filters, before=data.older) if data.older else None
    return page(request, "audit.html", user=user, data=data, filters=filters, older=older)
