"""Prometheus gauges of the fleet, read from the database at scrape time.

Per node (labels `node`, `channel`): the revision it serves, its lag behind the channel's
head, its heartbeat age, whether it is stale and whether its audit passed. Per channel: how
many nodes follow it, how many serve its head, how many are stale or failed their audit,
and the largest lag. The same numbers `weact nodes` shows.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from registry.domain import NodeStatus

logger = logging.getLogger(__name__)

NODE_LABELS = ["node", "channel"]


class FleetCollector(Collector):
    def __init__(self, read_fleet: Callable[[], list[NodeStatus]]) -> None:
        self.read_fleet = read_fleet

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            fleet = self.read_fleet()
        except Exception:  # a scrape must not fail because the database is down
            logger.exception("could not read the fleet")
            return
        yield from _per_node(fleet)
        yield from _per_channel(fleet)


def _per_node(fleet: list[NodeStatus]) -> Iterator[GaugeMetricFamily]:
    families = {
        "revision": GaugeMetricFamily(
            "weact_node_revision", "Revision a node serves.", labels=NODE_LABELS
        ),
        "lag": GaugeMetricFamily(
            "weact_node_lag", "Revisions a node is behind its channel's head.", labels=NODE_LABELS
        ),
        "age": GaugeMetricFamily(
            "weact_node_heartbeat_age_seconds", "Seconds since a node's last heartbeat.",
            labels=NODE_LABELS,
        ),
        "stale": GaugeMetricFamily(
            "weact_node_stale", "1 when a node is stale (cut off or silent).", labels=NODE_LABELS
        ),
        "audit": GaugeMetricFamily(
            "weact_node_audit_ok", "1 when a node's last audit passed.", labels=NODE_LABELS
        ),
    }  # fmt: skip
    for status in fleet:
        labels = [status.node.id, status.node.channel]
        if status.node.revision is not None:
            families["revision"].add_metric(labels, status.node.revision)
        if status.lag is not None:
            families["lag"].add_metric(labels, status.lag)
        families["age"].add_metric(labels, status.heartbeat_age_s)
        families["stale"].add_metric(labels, float(status.stale))
        families["audit"].add_metric(labels, float(status.node.audit_ok))
    yield from families.values()


def _per_channel(fleet: list[NodeStatus]) -> Iterator[GaugeMetricFamily]:
    by_channel: dict[str, list[NodeStatus]] = defaultdict(list)
    for status in fleet:
        by_channel[status.node.channel].append(status)
    counts: dict[str, tuple[str, Callable[[NodeStatus], bool]]] = {
        "weact_channel_nodes": ("Nodes following a channel.", _any),
        "weact_channel_nodes_current": ("Nodes serving their channel's head.", _current),
        "weact_channel_nodes_stale": ("Stale nodes of a channel.", _stale),
        "weact_channel_nodes_audit_failed": (
            "Nodes of a channel whose last audit failed.",
            _audit_failed,
        ),
    }
    for name, (doc, keep) in counts.items():
        family = GaugeMetricFamily(name, doc, labels=["channel"])
        for channel, members in sorted(by_channel.items()):
            family.add_metric([channel], sum(1 for s in members if keep(s)))
        yield family
    lag = GaugeMetricFamily(
        "weact_channel_max_lag", "Largest lag of a channel's nodes.", labels=["channel"]
    )
    for channel, members in sorted(by_channel.items()):
        lag.add_metric([channel], max((s.lag or 0 for s in members), default=0))
    yield lag


def _any(status: NodeStatus) -> bool:
    return True


def _current(status: NodeStatus) -> bool:
    return status.lag == 0 and not status.stale


def _stale(status: NodeStatus) -> bool:
    return status.stale


def _audit_failed(status: NodeStatus) -> bool:
    return not status.node.audit_ok
