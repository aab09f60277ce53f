"""Prometheus metrics, one CollectorRegistry per app instance.

Under `weact serve --workers N` each worker is its own process with its own counters, and a
scrape reaches one of them. `serve_workers` therefore sets `PROMETHEUS_MULTIPROC_DIR` before
the workers start: prometheus_client then keeps counters and histograms in files there, and
every worker's `/v1/metrics` sums all of them. Gauges read at scrape time (registry contents
from the database; long-polls waiting, channel wakes) stay those of the answering process.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
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


MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


class _Collected(Collector):
    """Another registry's metrics, as one collector of a scrape registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        yield from self.registry.collect()


class Metrics:
    def __init__(self, read_stats: Callable[[], RegistryStats] | None = None) -> None:
        self.registry = CollectorRegistry()  # what this process reads at scrape time
        # Workers: counters live in files shared by every worker (not in self.registry).
        self.multiprocess_dir = os.environ.get(MULTIPROC_ENV) or None
        shared = None if self.multiprocess_dir else self.registry
        if read_stats is not None:
            self.registry.register(RegistryCollector(read_stats))
        self.requests = Counter(
            "weact_http_requests",
            "HTTP requests by method, route and status.",
            ["method", "route", "status"],
            registry=shared,
        )
        self.latency = Histogram(
            "weact_http_request_duration_seconds",
            "HTTP request latency by method and route.",
            ["method", "route"],
            registry=shared,
        )

    def watch(self, name: str, doc: str, read: Callable[[], float]) -> None:
        """A gauge whose value is read from `read` at scrape time."""
        Gauge(name, doc, registry=self.registry).set_function(read)

    def render(self) -> bytes:
        if self.multiprocess_dir is None:
            return generate_latest(self.registry)
        scrape = CollectorRegistry()
        MultiProcessCollector(scrape, path=self.multiprocess_dir)  # type: ignore[no-untyped-call]
        scrape.register(_Collected(self.registry))
        return generate_latest(scrape)


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
