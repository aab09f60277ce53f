"""The runtime node's HTTP API: episodes, their event streams, metrics, and MCP at /mcp.

    POST /v1/episodes              {task, policy, order, max_steps, guesses} -> 201 {id, ...}
    GET  /v1/episodes              [{id, status, policy}] of the caller's episodes, oldest first
    GET  /v1/episodes/{id}         trajectory: messages, per-step records, switches, totals
    GET  /v1/episodes/{id}/events  Server-Sent Events (tokens, tool calls, switches, steps)
    POST /v1/episodes/{id}/cancel  stop a running episode -> {id, status: "cancelled", ...}
    GET  /livez                    {"status": "alive"}, without a token: the process answers
    GET  /metrics                  Prometheus: switch latency, rebuild time, their shares
    GET  /healthz                  {"status": "ok" | "stale" | "audit_failed", "adapters": [...],
                                    "library": {channel, revision, head, lag, stale, ...}}
    POST /mcp                      MCP streamable HTTP: open_episode, load_lora, offload_lora,
                                   close_episode (see runtime.mcp_server)

Episodes run as background tasks of the app. With tokens, every HTTP and MCP request but
/livez needs `Authorization: Bearer <token>` for one of them (401 otherwise). An episode
belongs to the token that started it: another client token gets 404 for it, its events and
its cancel, and does not see it listed; an admin token (`weact runtime serve --admin-token`,
`WEACT_RUNTIME_ADMIN_TOKEN`) sees and cancels every episode (`runtime.server.auth`). Errors are
`{"error": code, "detail": ...}`, their status from `runtime.errors.HTTP_STATUS`.

One module per concept, as `registry.api`: `schemas` (bodies), `auth` (bearer tokens),
`metrics` (Prometheus), `deps` (the node's `Runtime` and route dependencies), `routes`,
and `app` (`create_app`: wiring and lifespan).
"""

from runtime.server.app import create_app

__all__ = ["create_app"]
