"""A node refuses at once an episode it cannot run, and a failed episode says why."""

from __future__ import annotations

import httpx
from support.engines import ScriptedEngine
from support.serving import serve

from runtime.agent import failure_cause
from runtime.errors import UnknownAdapterError
from runtime.policy import HardPolicy
from runtime.server import create_app


def test_an_episode_whose_order_names_a_missing_capability_is_refused_at_once() -> None:
    """The library lost write (a revoke) while the node's hard order still names it."""
    engine = ScriptedEngine(adapters=("plan", "search"))
    app = create_app(engine, policy=HardPolicy(("plan", "search", "write")))
    with serve(app) as url, httpx.Client(base_url=url) as client:
        refused = client.post("/v1/episodes", json={"task": "Capital of France?"})
        soft = client.post("/v1/episodes", json={"task": "Capital?", "policy": "soft"})
        listed = client.get("/v1/episodes").json()
    assert refused.status_code == 409
    assert refused.json() == {
        "error": "cannot_run",
        "detail": "cannot run this episode: the hard order plan -> search -> write names "
        "write, which the library has no adapter for",
    }
    assert soft.status_code == 201  # a policy it can run still starts
    assert [e["id"] for e in listed] == [soft.json()["id"]]  # the refused one left nothing
    assert len(engine.sessions) == 2
    assert engine.sessions[0].closed


def test_a_failed_episode_reports_the_cause_not_the_exception_group() -> None:
    cause = UnknownAdapterError("write", ["plan", "search"])
    group = ExceptionGroup("unhandled errors in a TaskGroup", [ExceptionGroup("inner", [cause])])
    assert failure_cause(group) == (
        "UnknownAdapterError: capability 'write' is unavailable (not in this episode's "
        "library); available: plan, search"
    )
    assert failure_cause(ValueError("bad\nline")) == "ValueError: bad line"


def test_the_node_api_answers_every_error_in_the_error_detail_shape() -> None:
    app = create_app(ScriptedEngine())
    with serve(app) as url, httpx.Client(base_url=url) as client:
        untyped = client.post("/v1/episodes", content=b'{"task": "x"}')  # no content type
        empty = client.post("/v1/episodes", json={})
        nowhere = client.get("/v1/nowhere")
    assert untyped.status_code == 422
    assert untyped.json()["error"] == "invalid"
    assert "send the body as JSON with Content-Type: application/json" in untyped.json()["detail"]
    assert empty.status_code == 422
    assert empty.json() == {"error": "invalid", "detail": "body.task: Field required"}
    assert nowhere.status_code == 404
    assert nowhere.json() == {"error": "not_found", "detail": "Not Found"}
