"""Every write endpoint, for every role: allowed, or 403 with nothing changed; no token: 401."""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import Harness, World, build_harness, make_world

from registry.auth import ROLE_PERMISSIONS, Permission
from registry.domain import Role

Request = tuple[str, str, dict[str, Any]]
_seed = itertools.count(100)


def _adapter_id(w: World) -> int:
    return int(w.adapter("plan", next(_seed))["id"])


def _approved_id(w: World) -> int:
    return int(w.approved("plan", next(_seed))["id"])


def _blob(w: World) -> Request:
    data = f"blob {next(_seed)}".encode()
    import hashlib

    return "PUT", f"/blobs/{hashlib.sha256(data).hexdigest()}", {"content": data}


def _backbone(w: World) -> Request:
    from factories import backbone_manifest_json, write_backbone

    seed = next(_seed)
    manifest = backbone_manifest_json(write_backbone(w.api.tmp / f"bb{seed}", seed=seed))
    return "POST", "/backbones", {"json": {"name": f"bb{seed}", "manifest": manifest}}


def _benchmark_body() -> dict[str, Any]:
    return {
        "name": f"b{next(_seed)}",
        "version": 1,
        "dataset_digest": "d" * 64,
        "scope": "search",  # never promoted here, so the gate stays out of the way
        "metric": "m",
        "direction": "higher",
        "tolerance": 0,
    }


def _evaluation(w: World) -> Request:
    body = _benchmark_body()
    w.api.ok("POST", "/benchmarks", "admin", json=body)
    adapter_id = w.adapter("search", next(_seed))["id"]
    evaluation = {"benchmark": body["name"], "benchmark_version": 1, "adapter_id": adapter_id}
    return "POST", "/evaluations", {"json": {**evaluation, "score": 1.0, "n": 1}}


def _promote(w: World) -> Request:
    body = {"backbone": w.backbone, "adapters": {"plan": _approved_id(w)}, "create": True}
    return "POST", "/channels/prod/promote", {"json": body}


def _rollback(w: World) -> Request:
    for _seed in range(2):
        body = {"backbone": w.backbone, "adapters": {"plan": _approved_id(w)}, "create": True}
        w.api.ok("POST", "/channels/prod/promote", "admin", json=body)
    return "POST", "/channels/prod/rollback", {"json": {"to_revision": 1}}


ENDPOINTS: dict[str, tuple[Permission, Callable[[World], Request]]] = {
    "tokens": (
        Permission.ADMIN,
        lambda w: ("POST", "/tokens", {"json": {"name": "x", "role": "reader"}}),
    ),
    "blobs": (Permission.PUBLISH, _blob),
    "backbones": (Permission.ADMIN, _backbone),
    "capabilities": (
        Permission.ADMIN,
        lambda w: ("POST", "/capabilities", {"json": {"name": f"c{next(_seed)}"}}),
    ),
    "adapters": (
        Permission.PUBLISH,
        lambda w: (
            "POST",
            "/adapters",
            {"json": w.api.adapter_body("plan", w.backbone, next(_seed))},
        ),
    ),
    "approve": (
        Permission.APPROVE,
        lambda w: ("POST", f"/adapters/{_adapter_id(w)}/approve", {"json": {}}),
    ),
    "reject": (
        Permission.APPROVE,
        lambda w: ("POST", f"/adapters/{_adapter_id(w)}/reject", {"json": {}}),
    ),
    "revoke": (
        Permission.APPROVE,
        lambda w: ("POST", f"/adapters/{_approved_id(w)}/revoke", {"json": {}}),
    ),
    "benchmarks": (
        Permission.APPROVE,
        lambda w: ("POST", "/benchmarks", {"json": _benchmark_body()}),
    ),
    "evaluations": (Permission.EVALUATE, _evaluation),
    "promote": (Permission.APPROVE, _promote),
    "rollback": (Permission.APPROVE, _rollback),
    "heartbeat": (
        Permission.HEARTBEAT,
        lambda w: (
            "POST",
            "/nodes/n1/heartbeat",
            {"json": {"channel": "prod", "revision": 1, "audit": {"ok": True}}},
        ),
    ),
}
ROLES = {
    "admin": Role.ADMIN,
    "reader": Role.READER,
    "publisher": Role.PUBLISHER,
    "approver": Role.APPROVER,
    "node": Role.NODE,
}


@pytest.fixture(scope="module")
def shared_world(
    sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    """One registry for the whole matrix (auth does not depend on the database)."""
    tmp = tmp_path_factory.mktemp("auth")
    shutil.copyfile(sqlite_template, tmp / "registry.db")
    for api in build_harness(f"sqlite:///{tmp / 'registry.db'}", str(tmp / "blobs"), tmp):
        yield make_world(api)


@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
@pytest.mark.parametrize("who", [*ROLES, None])
def test_write_endpoint_permissions(shared_world: World, endpoint: str, who: str | None) -> None:
    api: Harness = shared_world.api
    permission, make = ENDPOINTS[endpoint]
    method, path, kwargs = make(shared_world)
    before, files = api.counts(), api.store_files()
    response = api.request(method, path, who, **kwargs)
    if who is None:
        assert response.status_code == 401, response.text
        assert response.json()["error"] == "unauthorized"
        assert response.headers["www-authenticate"] == "Bearer"
    elif permission in ROLE_PERMISSIONS[ROLES[who]]:
        assert response.status_code in (200, 201), response.text
        return
    else:
        assert response.status_code == 403, response.text
        assert response.json()["error"] == "forbidden"
    assert api.counts() == before
    assert api.store_files() == files


READS = [
    "/backbones",
    "/capabilities",
    "/adapters",
    "/channels",
    "/nodes",
    "/events",
    "/events/verify",
    "/benchmarks",
    "/evaluations",
]


@pytest.mark.parametrize("path", READS)
def test_reads_need_a_token_of_any_role(shared_world: World, path: str) -> None:
    api = shared_world.api
    assert api.request("GET", path, None).status_code == 401
    for who in ROLES:
        assert api.request("GET", path, who).status_code == 200


def test_revoked_or_garbage_tokens_are_refused(shared_world: World) -> None:
    client = shared_world.api.client
    for header in ("Bearer ", "Bearer weact_nope", "Basic abc", "weact_x"):
        response = client.get("/v1/adapters", headers={"Authorization": header})
        assert response.status_code == 401
