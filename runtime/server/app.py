"""The runtime node's HTTP API: episodes, their event streams, metrics, and MCP at /mcp.

    POST /v1/episodes              {task, policy, order, max_steps, guesses} -> 201 {id, ...}
    GET  /v1/episodes              [{id, status, policy}], oldest first
    GET  /v1/episodes/{id}         trajectory: messages, per-step records, switches, totals
    GET  /v1/episodes/{id}/events  Server-Sent Events (tokens, tool calls, switches, steps)
    GET  /metrics                  Prometheus: switch latency, rebuild time, their shares
    GET  /healthz                  {"status": "ok" | "stale" | "audit_failed", "adapters": [...],
                                    "library": {channel, revision, head, lag, stale, ...}}
    POST /mcp                      MCP streamable HTTP: open_episode, load_lora, offload_lora,
                                   close_episode (see runtime.mcp_server)

Episodes run as background tasks of the app. With tokens, every HTTP and MCP request needs
`Authorization: Bearer <token>` for one of them (401 otherwise). Errors are
`{"error": code, "detail": ...}`.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal

import anyio
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from fastapi.sse import EventSourceResponse, ServerSentEvent
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from pydantic import BaseModel, Field
from starlette.types import ASGIApp, Receive, Scope, Send

from runtime.agent import Agent, AgentConfig
from runtime.engine import Engine, SwitchRecord
from runtime.episode import Episode, EpisodeManager, LibrarySource, totals
from runtime.errors import (
    EpisodeNotFoundError,
    InvalidPolicyError,
    RuntimeEngineError,
    TooManyEpisodesError,
)
from runtime.handles import DEFAULT_IDLE_S
from runtime.mcp_client import McpToolbox
from runtime.mcp_server import build_mcp_server
from runtime.policy import HardPolicy, Policy, make_policy, parse_guesses

logger = logging.getLogger(__name__)

ERROR_STATUS: dict[type[Exception], tuple[int, str]] = {
    EpisodeNotFoundError: (404, "not_found"),
    InvalidPolicyError: (422, "invalid"),
    TooManyEpisodesError: (503, "busy"),
}
SHARE_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)


class EpisodeCreate(BaseModel):
    task: str = Field(min_length=1, max_length=20_000)
    policy: Literal["hard", "soft"] | None = None
    order: list[str] | None = Field(default=None, min_length=1, max_length=32)
    max_steps: int | None = Field(default=None, gt=0, le=1024)
    # soft policy: what to prefetch while a tool runs, by active config ("backbone" = none)
    guesses: dict[str, str] | None = Field(default=None, max_length=64)


class EpisodePublic(BaseModel):
    id: str
    status: str
    policy: dict[str, Any]


class Metrics:
    """Prometheus metrics of one app (its own registry, so apps never share series)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.switch_s = Histogram(
            "weact_runtime_switch_seconds", "Adapter switch latency", registry=self.registry
        )
        self.rebuild_s = Histogram(
            "weact_runtime_rebuild_seconds", "KV-cache rebuild per step", registry=self.registry
        )
        self.episode_s = Histogram(
            "weact_runtime_episode_seconds", "Episode wall time", registry=self.registry
        )
        self.switch_share = Histogram(
            "weact_runtime_switch_share",
            "Share of episode time spent switching adapters",
            buckets=SHARE_BUCKETS,
            registry=self.registry,
        )
        self.rebuild_share = Histogram(
            "weact_runtime_rebuild_share",
            "Share of episode time spent rebuilding KV caches",
            buckets=SHARE_BUCKETS,
            registry=self.registry,
        )

        self.episodes = Counter(
            "weact_runtime_episodes", "Finished episodes", ["status"], registry=self.registry
        )
        self.tokens = Counter(
            "weact_runtime_tokens", "Tokens run through the model", ["kind"], registry=self.registry
        )
        self.seconds = Counter(
            "weact_runtime_model_seconds",
            "Model time (tokens/s = tokens / seconds per kind)",
            ["kind"],
            registry=self.registry,
        )

    def on_switch(self, record: SwitchRecord) -> None:
        self.switch_s.observe(record.seconds)

    def on_episode(self, episode: Episode) -> None:
        for step in episode.steps:
            if step.rebuild_s > 0:
                self.rebuild_s.observe(step.rebuild_s)
            self.tokens.labels("prefilled").inc(step.prefilled)
            self.tokens.labels("decoded").inc(step.decoded)
            self.seconds.labels("prefilled").inc(step.prefill_s)
            self.seconds.labels("decoded").inc(step.decode_s)
        self.episodes.labels(episode.status).inc()
        t = totals(episode)
        self.episode_s.observe(episode.elapsed_s)
        self.switch_share.observe(t["switch_share"])
        self.rebuild_share.observe(t["rebuild_share"])


@dataclass
class Runtime:
    """What the routes need: the episodes, how to run one, and the metrics."""

    episodes: EpisodeManager
    agent_config: AgentConfig
    metrics: Metrics
    toolbox: McpToolbox | None = None
    task_group: Any = None

    def start(self, body: EpisodeCreate) -> Episode:
        policy = episode_policy(self.episodes.policy, body, self.episodes.engine.adapters)
        episode = self.episodes.create(policy=policy, task=body.task)
        config = self.agent_config
        if body.max_steps is not None:
            config = replace(config, max_steps=body.max_steps)
        agent = Agent(self.episodes.engine.tokenizer, self.toolbox, config)
        episode.status = "running"  # before the task starts: an SSE reader must wait for it
        self.task_group.start_soon(self._run, agent, episode, body.task)
        return episode

    async def _run(self, agent: Agent, episode: Episode, task: str) -> None:
        await agent.run(episode, task)
        self.metrics.on_episode(episode)
        await anyio.to_thread.run_sync(self.episodes.finished, episode)


def episode_policy(default: Policy, body: EpisodeCreate, library: Collection[str]) -> Policy:
    """The node's policy, or the one the request asks for (keeping the node's hard order)."""
    if body.policy is None and body.order is None and body.guesses is None:
        return default
    kind = body.policy or default.kind
    order = body.order
    if order is None and kind == "hard" and isinstance(default, HardPolicy):
        order = list(default.order)
    guesses = parse_guesses(body.guesses) if body.guesses is not None else None
    return make_policy(kind, order, library, guesses)


def get_runtime(request: Request) -> Runtime:
    return request.app.state.runtime  # type: ignore[no-any-return]


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


def get_episode(episode_id: str, rt: RuntimeDep) -> Episode:
    return rt.episodes.get(episode_id)


EpisodeDep = Annotated[Episode, Depends(get_episode)]


class BearerAuth:
    """Every HTTP request (MCP included) must carry one of the bearer tokens; 401 otherwise.

    Each token is a client of its own: an MCP episode handle works only with the token that
    opened it.
    """

    def __init__(self, app: ASGIApp, tokens: Collection[str]) -> None:
        self.app = app
        self.expected = [f"Bearer {token}".encode() for token in tokens]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope["headers"]).get(b"authorization", b"")
        # every token compared, in constant time each: no early exit tells which one is near
        if sum(hmac.compare_digest(given, expected) for expected in self.expected):
            await self.app(scope, receive, send)
            return
        response = JSONResponse(
            {"error": "unauthorized", "detail": "missing or wrong bearer token"},
            status_code=401,
            headers={"WWW-Authenticate": "Bearer"},
        )
        await response(scope, receive, send)


def create_app(
    engine: Engine,
    *,
    policy: Policy | None = None,
    agent_config: AgentConfig | None = None,
    tool_servers: Sequence[Any] = (),
    token: str | Sequence[str] | None = None,
    host: str = "127.0.0.1",
    max_episodes: int = 64,
    source: LibrarySource | None = None,
    handle_idle_s: float = DEFAULT_IDLE_S,
) -> FastAPI:
    """The runtime app over a loaded engine; `tool_servers` are external MCP tool targets.

    `token`: one bearer token or several (one per client); `source`: the channel follower
    that keeps the engine's library, whose revision new episodes are pinned to;
    `handle_idle_s`: how long an MCP episode handle lives unused.
    """
    metrics = Metrics()
    episodes = EpisodeManager(
        engine,
        policy=policy,
        max_episodes=max_episodes,
        on_switch=metrics.on_switch,
        source=source,
        handle_idle_s=handle_idle_s,
    )
    runtime = Runtime(episodes, agent_config or AgentConfig(), metrics)
    mcp_server = build_mcp_server(episodes)
    mcp_app = mcp_server.streamable_http_app(streamable_http_path="/mcp", host=host)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with (
            McpToolbox(tool_servers) as toolbox,
            mcp_server.session_manager.run(),
            anyio.create_task_group() as tg,
        ):
            runtime.toolbox, runtime.task_group = toolbox, tg
            tg.start_soon(_expire_handles, episodes)
            yield
            tg.cancel_scope.cancel()
        episodes.close_all()

    app = FastAPI(title="WeAct runtime", lifespan=lifespan)
    app.state.runtime = runtime
    app.include_router(_router())
    app.router.routes.extend(mcp_app.routes)
    app.add_exception_handler(RuntimeEngineError, _engine_error)
    tokens = [token] if isinstance(token, str) else list(token or ())
    if any(tokens):
        app.add_middleware(BearerAuth, tokens=[t for t in tokens if t])
    return app


async def _expire_handles(episodes: EpisodeManager) -> None:
    """Close the episodes of idle MCP handles, also when nobody calls (frees their weights)."""
    period = min(max(episodes.handles.idle_s / 4, 0.05), 30.0)
    while True:
        await anyio.sleep(period)
        await anyio.to_thread.run_sync(episodes.expire_idle)


async def _engine_error(request: Request, exc: Exception) -> JSONResponse:
    status, code = next(
        (v for t, v in ERROR_STATUS.items() if isinstance(exc, t)), (400, "bad_request")
    )
    return JSONResponse({"error": code, "detail": str(exc)}, status_code=status)


def _router() -> APIRouter:
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

    return router


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
