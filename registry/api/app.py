"""The API application: ``create_api_app(settings)`` wires state, routers, errors, metrics.

This is the JSON API alone; ``registry.app.create_app`` (the composition root, above both
``registry.api`` and ``registry.web``) adds the web pages to it, and is what ``weact serve``
runs.

The schema is not created here: run ``registry.db.migrate.upgrade(url)`` first. On
PostgreSQL the app listens for channel notifications of every registry process on the same
database (``registry.api.pgbus``) from startup to shutdown.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.routing import BaseRoute

from registry.api.deps import AppState
from registry.api.errors import install_error_handlers
from registry.api.fleet_metrics import FleetCollector
from registry.api.freshness import change_stamps
from registry.api.metrics import Metrics, MetricsMiddleware
from registry.api.middleware import BodyLimitMiddleware, InternalErrorMiddleware
from registry.api.notify import Changes, ChannelNotifier
from registry.api.pgbus import channel_bus
from registry.api.routes import (
    adapters,
    backbones,
    blobs,
    capabilities,
    channel_trust,
    channels,
    evaluations,
    events,
    health,
    nodes,
    signatures,
    tokens,
    trust,
)
from registry.api.schemas import RevisionPublic
from registry.db.migrate import check_current
from registry.db.session import Database
from registry.domain import NodeStatus, RegistryStats, Revision
from registry.services.fleet_health import fleet_status
from registry.services.read_cache import ChannelReads, TokenReads
from registry.services.stats import registry_stats
from registry.settings import Settings
from storage import BlobStore, open_store

# Matched in this order, route by route, on every request: channels first, since every node
# and follower reads (and long-polls) its channel, and each route tried before costs it a
# regex and FastAPI's scope bookkeeping (a third of a channel read's CPU with channels tenth).
# No path of one router matches a route of another, so the order changes no answer.
ROUTERS = (
    channels,
    health,
    tokens,
    blobs,
    backbones,
    capabilities,
    adapters,
    signatures,
    trust,
    evaluations,
    channel_trust,
    nodes,
    events,
)


# Every route at ``/v1``, as its module made it. An app lists them and re-derives nothing:
# `app.include_router` made each app derive every route again (FastAPI's dependants and
# response models, about 0.1 s of CPU) on its first request, which every test's app paid.
# Routes hold no state: they reach it through ``request.app.state.weact``.
API_ROUTES: tuple[BaseRoute, ...] = tuple(route for m in ROUTERS for route in m.router.routes)


def open_blob_store(settings: Settings) -> BlobStore:
    if settings.store_url.startswith("s3://") and settings.s3_endpoint_url:
        return open_store(settings.store_url, endpoint_url=settings.s3_endpoint_url)
    return open_store(settings.store_url)


def read_fleet(db: Database) -> list[NodeStatus]:
    with db.read() as session:
        return fleet_status(session=session)


def render_revision(revision: Revision) -> bytes:
    """The JSON body of a channel read, as the route's response model writes it."""
    return RevisionPublic.model_validate(revision).model_dump_json().encode()


def create_api_app(
    settings: Settings, *, database: Database | None = None, routes: Sequence[BaseRoute] = ()
) -> FastAPI:
    """The registry API over ``settings`` (an existing ``Database`` may be shared), with
    ``routes`` served after its own (the composition root passes the pages)."""
    db = database or Database(
        settings.database_url, lock_timeout_s=settings.database_lock_timeout_s
    )

    def read_stats() -> RegistryStats:
        with db.read() as session:
            return registry_stats(session=session)

    notifier, token_changes = ChannelNotifier(), Changes()
    stamps = change_stamps(db, notifier, token_changes)
    state = AppState(
        settings=settings,
        db=db,
        store=open_blob_store(settings),
        metrics=Metrics(read_stats),
        notifier=notifier,
        token_changes=token_changes,
        channels=ChannelReads(db, stamps.channels, render_revision, settings.channel_cache_ttl_s),
        tokens=TokenReads(db, stamps.tokens, settings.token_cache_ttl_s),
    )
    state.metrics.registry.register(FleetCollector(lambda: read_fleet(db)))
    state.metrics.watch(
        "weact_long_polls_waiting", "Channel long-polls open now.", lambda: state.notifier.waiting
    )
    state.metrics.watch(
        "weact_channel_wakes",
        "Channel notifications heard by this process since it started (each one makes the "
        "open long-polls re-read their channel).",
        lambda: state.notifier.generation,
    )
    owns_db = database is None
    bus = channel_bus(db.engine, state.notifier, state.token_changes)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        check_current(db.engine)
        if bus is not None:
            bus.start()
        yield
        state.notifier.close()
        if bus is not None:
            bus.stop()
        stamps.release()
        if owns_db:
            state.db.dispose()

    app = FastAPI(
        title="WeAct registry", version="1", lifespan=lifespan, routes=[*API_ROUTES, *routes]
    )
    app.state.weact = state
    install_error_handlers(app)
    app.add_middleware(
        BodyLimitMiddleware,
        max_json_bytes=settings.max_json_bytes,
        max_body_bytes=settings.max_body_bytes,
    )
    app.add_middleware(MetricsMiddleware, metrics=state.metrics)
    app.add_middleware(InternalErrorMiddleware)  # outermost: a 500 keeps the connection
    return app
