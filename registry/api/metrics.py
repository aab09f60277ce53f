"""Prometheus metrics, one CollectorRegistry per app instance."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from registry.domain import RegistryStats

logger = logging.getLogger(__name__)


class RegistryCollector(Collector):
    """Gauges of the registry's contents, read from the database at scrape time."""

    def __init__(self, read_stats: Callable[[], RegistryStats]) -> None:
        self.read_stats = read_stats

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            stats = self.read_stats()
        except Exception:  # a scrape must not fail because the database is down
            logger.exception("could not read registry stats")
            return
        yield _gauge(
            "weact_adapters", "Adapter versions by state.", "state", stats.adapters_by_state
        )
        yield _gauge(
            "weact_channel_revision",
            "Current revision of each channel.",
            "channel",
            stats.channel_revisions,
        )
        yield _gauge(
            "weact_nodes", "Runtime nodes by last audit result.", "audit", stats.nodes_by_audit
        )
        events = GaugeMetricFamily("weact_events", "Events in the audit log.")
        events.add_metric([], stats.events)
        yield events


def _gauge(name: str, doc: str, label: str, values: dict[str, int]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc, labels=[label])
    for key, value in sorted(values.items()):
        family.add_metric([key], value)
    return family


class Metrics:
    def __init__(self, read_stats: Callable[[], RegistryStats] | None = None) -> None:
        self.registry = CollectorRegistry()
        if read_stats is not None:
            self.registry.register(RegistryCollector(read_stats))
        self.requests = Counter(
            "weact_http_requests",
            "HTTP requests by method, route and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "weact_http_request_duration_seconds",
            "HTTP request latency by method and route.",
            ["method", "route"],
            registry=self.registry,
        )

    def watch(self, name: str, doc: str, read: Callable[[], float]) -> None:
        """A gauge whose value is read from `read` at scrape time."""
        Gauge(name, doc, registry=self.registry).set_function(read)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _route_label(scope: Scope) -> str:
    """The matched route template (with the prefix of any mount), never the raw path."""
    effective = scope.get("fastapi", {}).get("effective_route_context")
    path = getattr(effective, "path", None) or getattr(scope.get("route"), "path", None)
    return str(path) if path else "unmatched"


class MetricsMiddleware:
    """Counts requests and times them, labelled by the matched route template."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500
        start = time.perf_counter()

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = _route_label(scope)
            method = str(scope.get("method", ""))
            self.metrics.latency.labels(method, route).observe(time.perf_counter() - start)
            self.metrics.requests.labels(method, route, str(status)).inc()
