"""The node's HTTP routes: health, metrics, episodes and their event streams."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
from fastapi import APIRouter
from fastapi.responses import Response
from fastapi.sse import EventSourceResponse, ServerSentEvent
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from runtime.episode import Episode
from runtime.server.deps import EpisodeDep, RuntimeDep
from runtime.server.schemas import EpisodeCreate, EpisodePublic

router = APIRouter()


@router.get("/healthz")
def healthz(rt: RuntimeDep) -> dict[str, Any]:
    body: dict[str, Any] = {"status": "ok", "adapters": sorted(rt.episodes.engine.adapters)}
    if rt.episodes.source is not None:
        library = rt.episodes.source.health()
        body["library"] = library
        if library.get("stale"):
            body["status"] = "stale"  # serving its last verified library, cut off
        elif not library.get("audit_ok", True):
            body["status"] = "audit_failed"
    return body


@router.get("/metrics")
def metrics(rt: RuntimeDep) -> Response:
    return Response(generate_latest(rt.metrics.registry), media_type=CONTENT_TYPE_LATEST)


@router.post("/v1/episodes", status_code=201)
async def create_episode(body: EpisodeCreate, rt: RuntimeDep) -> EpisodePublic:
    episode = rt.start(body)
    return EpisodePublic(id=episode.id, status=episode.status, policy=episode.policy.to_json())


@router.get("/v1/episodes")
def list_episodes(rt: RuntimeDep) -> list[EpisodePublic]:
    return [
        EpisodePublic(id=e.id, status=e.status, policy=e.policy.to_json())
        for e in rt.episodes.list()
    ]


@router.get("/v1/episodes/{episode_id}")
def show_episode(episode: EpisodeDep) -> dict[str, Any]:
    return episode.to_json()


@router.get("/v1/episodes/{episode_id}/events", response_class=EventSourceResponse)
async def episode_events(episode: EpisodeDep, after: int = 0) -> AsyncIterator[ServerSentEvent]:
    async for event in _follow(episode, after):
        yield ServerSentEvent(event=event["type"], id=str(event["seq"]), raw_data=event["json"])


async def _follow(episode: Episode, after: int) -> AsyncIterator[dict[str, Any]]:
    """The episode's events from `after` on, until its log closes."""
    seq = max(after, 0)
    while True:
        events, closed = await anyio.to_thread.run_sync(
            episode.events.wait, seq, 1.0, abandon_on_cancel=True
        )
        for event in events:
            yield {"type": event["type"], "seq": event["seq"], "json": json.dumps(event)}
        seq += len(events)
        if closed and not events:
            return
