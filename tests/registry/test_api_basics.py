"""Health, tokens, blobs, backbones, capabilities over the ASGI app, on both databases."""

from __future__ import annotations

import hashlib
from pathlib import Path

from factories import backbone_manifest_json, write_backbone
from harness import Harness, World

from registry.api.app import API_ROUTES
from registry.app import create_app
from registry.settings import Settings
from registry.web import ROUTES as PAGES


def test_healthz_needs_no_token_and_metrics_a_token(api: Harness) -> None:
    assert api.ok("GET", "/healthz", None) == {"status": "ok"}
    api.ok("GET", "/capabilities", "reader")
    assert api.fails(401, "unauthorized", "GET", "/metrics", None)
    metrics = api.request("GET", "/metrics", "reader")
    assert metrics.status_code == 200, metrics.text
    assert 'weact_http_requests_total{method="GET",route="/v1/capabilities"' in metrics.text
    assert "weact_events " in metrics.text


def test_admin_creates_tokens_that_work(api: Harness) -> None:
    created = api.ok("POST", "/tokens", json={"name": "carol", "role": "reader"})
    assert created["role"] == "reader"
    assert created["token"].startswith("weact_")
    response = api.client.get(
        "/v1/backbones", headers={"Authorization": f"Bearer {created['token']}"}
    )
    assert response.status_code == 200
    bad = api.client.get("/v1/backbones", headers={"Authorization": "Bearer nope"})
    assert bad.status_code == 401
    assert bad.json()["error"] == "unauthorized"


def test_blob_roundtrip_and_idempotent_put(api: Harness) -> None:
    data = b"weights" * 1000
    digest = hashlib.sha256(data).hexdigest()
    first = api.request("PUT", f"/blobs/{digest}", "publisher", content=data)
    assert first.status_code == 201
    assert first.json() == {"digest": digest, "size": len(data)}
    again = api.request("PUT", f"/blobs/{digest}", "publisher", content=data)
    assert again.status_code == 200
    got = api.request("GET", f"/blobs/{digest}", "reader")
    assert got.status_code == 200
    assert got.content == data
    head = api.request("HEAD", f"/blobs/{digest}", "reader")
    assert head.status_code == 200
    assert head.headers["content-length"] == str(len(data))


def test_backbone_registered_by_manifest(api: Harness) -> None:
    path = write_backbone(api.tmp / "bb")
    manifest = backbone_manifest_json(path)
    created = api.ok("POST", "/backbones", json={"name": "tiny", "manifest": manifest})
    assert created["root"] == manifest["root"]
    assert created["tensor_count"] == len(manifest["tensors"])
    assert api.store.exists(created["manifest_digest"])
    assert api.ok("GET", f"/backbones/{manifest['root']}", "reader") == created
    assert api.ok("GET", f"/backbones/{created['id']}", "reader") == created
    dup = api.request("POST", "/backbones", json={"name": "again", "manifest": manifest})
    assert dup.status_code == 409
    assert dup.json()["error"] == "conflict"


def test_capabilities_created_and_listed(api: Harness) -> None:
    api.capability("plan", 0)
    api.capability("search", 1)
    names = [c["name"] for c in api.ok("GET", "/capabilities", "reader")]
    assert names == ["plan", "search"]
    assert api.ok("GET", "/capabilities/plan", "node")["order"] == 0
    missing = api.request("GET", "/capabilities/nope", "reader")
    assert missing.status_code == 404
    assert missing.json()["error"] == "not_found"


def test_metrics_count_registry_contents(world: World) -> None:
    adapter = world.approved("write")
    world.adapter("plan")
    world.promote({"write": adapter["id"]})
    text = world.api.request("GET", "/metrics", "reader").text
    assert 'weact_adapters{state="approved"} 1.0' in text
    assert 'weact_adapters{state="candidate"} 1.0' in text
    assert 'weact_channel_revision{channel="prod"} 1.0' in text


def test_openapi_lists_every_resource(sqlite_api: Harness) -> None:
    spec = sqlite_api.client.get("/openapi.json").json()
    paths = set(spec["paths"])
    for path in (
        "/v1/healthz",
        "/v1/blobs/{digest}",
        "/v1/adapters/{adapter_id}/lineage",
        "/v1/channels/{name}/promote",
        "/v1/nodes/{node_id}/heartbeat",
        "/v1/events/verify",
    ):
        assert path in paths
    assert "HTTPBearer" in spec["components"]["securitySchemes"]


def test_apps_list_the_routes_their_modules_made(api: Harness, tmp_path: Path) -> None:
    """Each app serves the very route objects of `API_ROUTES` and the pages' `ROUTES`, so
    none derives a route again (FastAPI's `include_router` made every app re-derive every
    route, dependants and response models, on its first request)."""
    other = create_app(Settings(database_url=f"sqlite:///{tmp_path / 'other.db'}",
                                store_url=str(tmp_path / "other")))  # fmt: skip
    made = [*API_ROUTES, *PAGES]
    for app in (api.client.app, other):
        served = [route for route in app.routes if route in made]
        assert [id(route) for route in served] == [id(route) for route in made]
    assert api.ok("GET", "/healthz", None) == {"status": "ok"}
