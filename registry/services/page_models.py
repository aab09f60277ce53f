"""Read models for the web pages: each function gathers what one page shows.

They compose the service functions the API routes call (``adapters.get_adapter``,
``channels.list_revisions``, ``events.verify``, ...) inside the caller's session. The few
reads that no API route offers yet live in ``registry.services.page_queries`` (gate reports,
the newest events, an adapter's evaluations).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sqlalchemy.orm import Session

from registry.domain import (
    AdapterState,
    AdapterVersion,
    Backbone,
    Capability,
    Evaluation,
    Event,
    Lineage,
    Node,
    Page,
    RegistryStats,
    Revision,
    VerifyReport,
)
from registry.errors import NotFoundError
from registry.services import (
    adapter_list,
    adapters,
    backbones,
    capabilities,
    channels,
    events,
    heartbeats,
    lineage,
    page_queries,
    stats,
    version_counts,
)
from registry.services.page_queries import GateRecord

RECENT = 5
WAITING_PER_PAGE = 20
PROMOTABLE = 20  # versions per capability offered on a channel's page


@dataclass(frozen=True)
class NodeStatus:
    """A node and how far it is behind its channel's head.

    ``head`` is None when the channel does not exist (or has no revision); ``lag`` is
    ``head - revision``, None when either is unknown (a node that has not synced yet).
    """

    node: Node
    head: int | None
    lag: int | None


@dataclass(frozen=True)
class Overview:
    stats: RegistryStats
    channels: list[Revision]
    candidates: Page
    nodes: list[NodeStatus]
    chain: VerifyReport
    gates: list[GateRecord]


@dataclass(frozen=True)
class Catalog:
    capabilities: list[Capability]
    backbones: list[Backbone]
    versions: dict[str, dict[str, int]]


@dataclass(frozen=True)
class AdapterListing:
    page: Page
    capabilities: list[Capability]
    backbones: list[Backbone]
    more: bool  # whether a page follows this one


@dataclass(frozen=True)
class ChannelSummary:
    head: Revision
    nodes: int
    behind: int


@dataclass(frozen=True)
class AdapterDetail:
    """One version's page: the version (its model card ``adapter.card`` and ``adapter.tags``
    with it), its lineage, the channel heads serving it and its evaluations."""

    adapter: AdapterVersion
    lineage: Lineage
    serving: list[Revision]
    evaluations: list[Evaluation]


@dataclass(frozen=True)
class ChannelDetail:
    head: Revision
    revisions: list[Revision]
    nodes: list[NodeStatus]
    gates: list[GateRecord]
    capabilities: list[Capability]
    promotable: dict[str, list[AdapterVersion]]


@dataclass(frozen=True)
class Comparison:
    revisions: list[Revision]
    before: Revision
    after: Revision


@dataclass(frozen=True)
class AuditLog:
    chain: VerifyReport
    events: list[Event]
    older: int | None


def _node_statuses(heads: dict[str, int], found: list[Node]) -> list[NodeStatus]:
    def status(node: Node) -> NodeStatus:
        head = heads.get(node.channel)
        lag = None if head is None or node.revision is None else head - node.revision
        return NodeStatus(node=node, head=head, lag=lag)

    return [status(node) for node in found]


def node_statuses(*, session: Session) -> list[NodeStatus]:
    """Every node with its channel's head revision and its lag."""
    heads = {c.channel: c.revision for c in channels.list_channels(session=session)}
    return _node_statuses(heads, heartbeats.list_nodes(session=session))


def overview(*, session: Session, waiting_page: int = 1) -> Overview:
    """The front page: counts, channel heads, a page of the candidates awaiting a decision
    (oldest first, ``WAITING_PER_PAGE`` a page), nodes, audit."""
    waiting = adapter_list.list_adapters(
        session=session,
        state=AdapterState.CANDIDATE.value,
        limit=WAITING_PER_PAGE,
        offset=(waiting_page - 1) * WAITING_PER_PAGE,
    )
    return Overview(
        stats=stats.registry_stats(session=session),
        channels=channels.list_channels(session=session),
        candidates=waiting,
        nodes=node_statuses(session=session),
        chain=events.verify_new(session=session),
        gates=page_queries.list_gate_reports(session=session, limit=RECENT),
    )


def catalog(*, session: Session) -> Catalog:
    """Capabilities and backbones, with each capability's version count by state."""
    return Catalog(
        capabilities=capabilities.list_capabilities(session=session),
        backbones=backbones.list_backbones(session=session),
        versions=version_counts.counts(session=session),
    )


def adapter_listing(
    *,
    session: Session,
    capability: str | None,
    backbone: str | None,
    state: str | None,
    limit: int,
    offset: int,
    tags: list[str] | None = None,
    label: str | None = None,
    text: str | None = None,
    sort: str = "oldest",
    after: int | None = None,
    before: int | None = None,
) -> AdapterListing:
    """A page of versions (the query of ``GET /v1/adapters`` and ``weact adapter list``:
    the same filters, search and sort; `after`/`before`: the page past or before that id,
    by key) and what its filters offer. One row more than a page is read to tell whether
    another page follows (before `before`, the page it came from does; by offset, none past
    `MAX_OFFSET`)."""
    found = adapter_list.list_adapters(
        session=session,
        capability=capability,
        backbone=backbone,
        state=state,
        limit=limit if before is not None else limit + 1,
        offset=offset,
        tags=tags,
        label=label,
        text=text,
        sort=sort,
        after=after,
        before=before,
    )
    deeper = sort in adapter_list.KEYSET_SORTS or offset + limit <= adapter_list.MAX_OFFSET
    more = before is not None or (len(found.items) > limit and deeper)
    found = replace(found, items=found.items[:limit])
    return AdapterListing(
        page=found,
        capabilities=capabilities.list_capabilities(session=session),
        backbones=backbones.list_backbones(session=session),
        more=more,
    )


def channel_summaries(*, session: Session) -> list[ChannelSummary]:
    """Each channel's head with how many nodes follow it and how many are behind."""
    statuses = node_statuses(session=session)

    def summary(head: Revision) -> ChannelSummary:
        following = [s for s in statuses if s.node.channel == head.channel]
        behind = [s for s in following if s.lag is None or s.lag > 0]
        return ChannelSummary(head=head, nodes=len(following), behind=len(behind))

    return [summary(head) for head in channels.list_channels(session=session)]


def adapter_detail(*, session: Session, adapter_id: int) -> AdapterDetail:
    """One version, its lineage, the channels whose head serves it, its evaluations."""
    adapter = adapters.get_adapter(session=session, adapter_id=adapter_id)
    serving = [
        head
        for head in channels.list_channels(session=session)
        if any(entry.adapter_id == adapter_id for entry in head.library.values())
    ]
    return AdapterDetail(
        adapter=adapter,
        lineage=lineage.lineage(session=session, adapter_id=adapter_id),
        serving=serving,
        evaluations=page_queries.adapter_evaluations(session=session, adapter_id=adapter_id),
    )


def _promotable(
    session: Session, backbone: str, names: list[str]
) -> dict[str, list[AdapterVersion]]:
    """The newest `PROMOTABLE` approved versions on ``backbone`` of each capability."""
    by_capability: dict[str, list[AdapterVersion]] = {}
    for name in names:
        approved = adapter_list.list_adapters(
            session=session,
            capability=name,
            backbone=backbone,
            state=AdapterState.APPROVED.value,
            limit=PROMOTABLE,
            sort="newest",
        )
        if approved.items:
            by_capability[name] = approved.items
    return by_capability


def channel_detail(*, session: Session, name: str) -> ChannelDetail:
    """A channel's head, its whole history, the nodes following it, its gate reports."""
    history = channels.list_revisions(session=session, channel=name)
    if not history:
        raise NotFoundError(f"channel {name!r} has no revision yet")
    head = history[-1]
    followers = [s for s in node_statuses(session=session) if s.node.channel == name]
    known = capabilities.list_capabilities(session=session)
    return ChannelDetail(
        head=head,
        revisions=history,
        nodes=followers,
        gates=page_queries.list_gate_reports(session=session, channel=name, limit=RECENT),
        capabilities=known,
        promotable=_promotable(session, head.backbone, [c.name for c in known]),
    )


def comparison(
    *, session: Session, channel: str, before: int | None, after: int | None
) -> Comparison:
    """Two revisions of a channel to compare: by default the head and the one before it.

    ``NotFoundError`` names a revision that does not exist.
    """
    history = channels.list_revisions(session=session, channel=channel)
    if not history:
        raise NotFoundError(f"channel {channel!r} has no revision yet")
    by_number = {r.revision: r for r in history}
    later = after if after is not None else history[-1].revision
    earlier = before if before is not None else max(history[0].revision, later - 1)
    for number in (earlier, later):
        if number not in by_number:
            raise NotFoundError(f"channel {channel!r} has no revision {number}")
    return Comparison(revisions=history, before=by_number[earlier], after=by_number[later])


def audit_log(
    *, session: Session, before: int | None, limit: int, **filters: str | None
) -> AuditLog:
    """The chain's verification and a page of events, newest first (``filters``: the
    ``action``, ``actor`` and ``subject`` of ``page_queries.newest_events``)."""
    page = page_queries.newest_events(session=session, before=before, limit=limit + 1, **filters)
    older = page[limit - 1].id if len(page) > limit else None
    return AuditLog(chain=events.verify(session=session), events=page[:limit], older=older)
