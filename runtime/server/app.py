"""The node app factory: `create_app(engine, ...)` wires the episodes, the MCP server at
/mcp, the routes, the error handler, bearer auth (client and admin tokens) and the lifespan
(external tool servers connected, MCP sessions running, episodes' task group, idle handles
expired)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from runtime.agent import AgentConfig
from runtime.engine import Engine
from runtime.episode import EpisodeManager, LibrarySource
from runtime.errors import RuntimeEngineError, http_status
from runtime.handles import DEFAULT_IDLE_S
from runtime.mcp_client import McpToolbox
from runtime.mcp_server import build_mcp_server
from runtime.policy import Policy
from runtime.server.auth import BearerAuth, admin_owners
from runtime.server.deps import Runtime
from runtime.server.metrics import Metrics
from runtime.server.routes import router


def create_app(
    engine: Engine,
    *,
    policy: Policy | None = None,
    agent_config: AgentConfig | None = None,
    tool_servers: Sequence[Any] = (),
    token: str | Sequence[str] | None = None,
    admin_token: str | Sequence[str] | None = None,
    host: str = "127.0.0.1",
    max_episodes: int = 64,
    source: LibrarySource | None = None,
    handle_idle_s: float = DEFAULT_IDLE_S,
) -> FastAPI:
    """The runtime app over a loaded engine; `tool_servers` are external MCP tool targets.

    `token`: one bearer token or several (one per client); `admin_token`: tokens that see
    every client's episodes (`runtime.server.auth`); `source`: the channel follower
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
    app.include_router(router)
    app.router.routes.extend(mcp_app.routes)
    app.add_exception_handler(RuntimeEngineError, _engine_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    tokens, admins = _tokens(token), _tokens(admin_token)
    app.state.admin_owners = admin_owners(admins)
    if tokens or admins:
        app.add_middleware(BearerAuth, tokens=[*tokens, *admins])
    return app


def _tokens(given: str | Sequence[str] | None) -> list[str]:
    return [t for t in ([given] if isinstance(given, str) else list(given or ())) if t]


async def _expire_handles(episodes: EpisodeManager) -> None:
    """Close the episodes of idle MCP handles, also when nobody calls (frees their weights)."""
    period = min(max(episodes.handles.idle_s / 4, 0.05), 30.0)
    while True:
        await anyio.sleep(period)
        await anyio.to_thread.run_sync(episodes.expire_idle)


async def _engine_error(request: Request, exc: Exception) -> JSONResponse:
    status, code = http_status(exc)
    return JSONResponse({"error": code, "detail": str(exc)}, status_code=status)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    """A body that is not the schema's (or not JSON at all): 422 in the `{error, detail}`
    shape, the detail one line naming each problem (`body.task: Field required`)."""
    assert isinstance(exc, RequestValidationError)
    problems = [
        f"{'.'.join(str(p) for p in issue.get('loc', ()))}: {issue.get('msg', 'invalid')}"
        for issue in exc.errors()
    ]
    if not request.headers.get("content-type", "").startswith("application/json"):
        problems.append("send the body as JSON with Content-Type: application/json")
    return JSONResponse({"error": "invalid", "detail": "; ".join(problems)}, status_code=422)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    """Starlette's own answers (an unknown path, a wrong method) in the same shape."""
    assert isinstance(exc, StarletteHTTPException)
    codes = {404: "not_found", 405: "method_not_allowed", 401: "unauthorized"}
    code = codes.get(exc.status_code, "bad_request" if exc.status_code < 500 else "error")
    return JSONResponse(
        {"error": code, "detail": str(exc.detail)},
        status_code=exc.status_code,
        headers=getattr(exc, "headers", None),
    )
