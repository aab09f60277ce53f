"""The node's HTTP routes: liveness, health, metrics, episodes and their event streams.

Episode routes see only the caller's episodes (an admin's: all; see `runtime.server.auth`).
"""

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
from runtime.server.auth import CallerDep, ScopeDep
from runtime.server.deps import EpisodeDep, RuntimeDep
from runtime.server.schemas import EpisodeCreate, EpisodePublic

router = APIRouter()


@router.get("/livez")
def livez() -> dict[str, str]:
    """The process answers HTTP; no token needed, and nothing else said."""
    return {"status": "alive"}


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
async def create_episode(body: EpisodeCreate, rt: RuntimeDep, owner: CallerDep) -> EpisodePublic:
    return _public(rt.start(body, owner))


@router.get("/v1/episodes")
def list_episodes(rt: RuntimeDep, scope: ScopeDep) -> list[EpisodePublic]:
    return [_public(e) for e in rt.episodes.list(owner=scope)]


@router.get("/v1/episodes/{episode_id}")
def show_episode(episode: EpisodeDep) -> dict[str, Any]:
    return episode.to_json()


@router.post("/v1/episodes/{episode_id}/cancel")
async def cancel_episode(episode: EpisodeDep, rt: RuntimeDep) -> EpisodePublic:
    """Stop a running episode; one that is not running is left as it is."""
    await rt.cancel(episode)
    return _public(episode)


@router.get("/v1/episodes/{episode_id}/events", response_class=EventSourceResponse)
async def episode_events(episode: EpisodeDep, after: int = 0) -> AsyncIterator[ServerSentEvent]:
    async for event in _follow(episode, after):
        yield ServerSentEvent(event=event["type"], id=str(event["seq"]), raw_data=event["json"])


def _public(episode: Episode) -> EpisodePublic:
    return EpisodePublic(id=episode.id, status=episode.status, policy=episode.policy.to_json())


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
