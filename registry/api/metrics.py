"""Prometheus metrics, one CollectorRegistry per app instance."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
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
        self.events = Counter(
            "weact_registry_actions",
            "Registry state changes by action.",
            ["action"],
            registry=self.registry,
        )

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
