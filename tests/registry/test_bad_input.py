"""Bad input: a 4xx with a clear typed error, and nothing changed (rows and blobs)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import Harness, World, build_harness, make_world

JSON = {"Content-Type": "application/json"}


def _unchanged(
    api: Harness, status: int, code: str, method: str, path: str, who: str = "admin", **kw: Any
) -> Any:
    before, files = api.counts(), api.store_files()
    detail = api.fails(status, code, method, path, who, **kw)
    assert api.counts() == before
    assert api.store_files() == files
    return detail


def test_malformed_json_and_unknown_fields(world: World) -> None:
    api = world.api
    detail = _unchanged(
        api, 422, "invalid", "POST", "/capabilities", content=b'{"name": "x",', headers=JSON
    )
    assert detail[0]["type"] == "json_invalid"
    detail = _unchanged(
        api, 422, "invalid", "POST", "/capabilities", json={"name": "x", "colour": "red"}
    )
    assert detail[0]["loc"] == ["body", "colour"]
    assert detail[0]["type"] == "extra_forbidden"
    body = api.adapter_body("write", world.backbone)
    body["provenance"]["replay_ratio"] = 0.5
    _unchanged(api, 422, "invalid", "POST", "/adapters", "publisher", json=body)
    _unchanged(api, 422, "invalid", "POST", "/capabilities", content=b"[1, 2]", headers=JSON)
    _unchanged(
        api, 422, "invalid", "POST", "/capabilities", json={"name": "x", "description": "a\x00b"}
    )
    _unchanged(api, 422, "invalid", "POST", "/capabilities", json={"name": "x", "order": 2**40})


@pytest.mark.parametrize(
    "name", ["../x", "a/b", "..", "Plan", "", "x" * 65, "1plan", "plan.v2", "pl an"]
)
def test_path_like_capability_names(sqlite_world: World, name: str) -> None:
    detail = _unchanged(
        sqlite_world.api, 422, "invalid", "POST", "/capabilities", json={"name": name}
    )
    assert "name" in str(detail)


def test_path_like_channel_and_node_names(world: World) -> None:
    api = world.api
    plan = world.approved("plan")
    body = {"backbone": world.backbone, "adapters": {"plan": plan["id"]}}
    _unchanged(api, 422, "invalid", "POST", "/channels/Prod/promote", "approver", json=body)
    _unchanged(api, 404, "not_found", "POST", "/channels/..%2Fx/promote", "approver", json=body)
    beat = {"channel": "prod", "revision": 1, "audit": {"ok": True}}
    _unchanged(api, 422, "invalid", "POST", "/nodes/..%2E/heartbeat", "node", json=beat)
    _unchanged(
        api,
        422,
        "invalid",
        "POST",
        "/nodes/n1/heartbeat",
        "node",
        json={**beat, "channel": "../etc"},
    )


def test_wrong_and_malformed_digests(world: World) -> None:
    api = world.api
    data = b"some bytes"
    wrong = hashlib.sha256(b"other bytes").hexdigest()
    detail = _unchanged(
        api, 422, "digest_mismatch", "PUT", f"/blobs/{wrong}", "publisher", content=data
    )
    assert detail["actual"] == hashlib.sha256(data).hexdigest()
    assert not api.store.exists(wrong)
    _unchanged(api, 422, "invalid", "PUT", "/blobs/ABC", "publisher", content=data)
    _unchanged(api, 422, "invalid", "PUT", f"/blobs/{wrong.upper()}", "publisher", content=data)
    _unchanged(api, 422, "invalid", "GET", "/blobs/not-a-digest", "reader")
    _unchanged(api, 404, "not_found", "GET", f"/blobs/{wrong}", "reader")


def test_adapter_referencing_missing_or_bad_things(world: World) -> None:
    api = world.api
    files = api.upload_adapter(seed=5)
    missing = "f" * 64
    for files_, code, status in (
        ({**files, "adapter_model.safetensors": missing}, "not_found", 404),
        ({"adapter_config.json": files["adapter_config.json"]}, "invalid", 422),
        ({**files, "../evil.py": files["adapter_config.json"]}, "invalid", 422),
        ({**files, "adapter_model.safetensors": "xyz"}, "invalid", 422),
        (
            {**files, "adapter_model.safetensors": files["adapter_config.json"]},
            "incompatible_adapter",
            422,
        ),
        (
            {**files, "adapter_config.json": files["adapter_model.safetensors"]},
            "incompatible_adapter",
            422,
        ),
    ):
        body = api.adapter_body("write", world.backbone, files=files_)
        _unchanged(api, status, code, "POST", "/adapters", "publisher", json=body)
    for field, value, status in (
        ("capability", "nope", 404),
        ("backbone", "0" * 64, 404),
        ("parent_id", 0, 422),
    ):
        body = {**api.adapter_body("write", world.backbone, files=files), field: value}
        _unchanged(
            api,
            status,
            "not_found" if status == 404 else "invalid",
            "POST",
            "/adapters",
            "publisher",
            json=body,
        )


def test_shape_mismatch_changes_nothing(world: World) -> None:
    from factories import adapter_files, backbone_shapes, write_adapter

    api = world.api
    directory = write_adapter(api.tmp / "wide", shapes=backbone_shapes(hidden=48))
    files = {name: api.put_blob(data) for name, data in adapter_files(directory).items()}
    body = api.adapter_body("write", world.backbone, files=files)
    _unchanged(api, 422, "incompatible_adapter", "POST", "/adapters", "publisher", json=body)


def test_bad_manifest_and_bad_ids(world: World) -> None:
    api = world.api
    manifest = {
        "root": "0" * 64,
        "tensors": [{"name": "w", "dtype": "F32", "shape": [2], "digest": "a" * 64}],
    }
    detail = _unchanged(
        api, 422, "invalid", "POST", "/backbones", json={"name": "x", "manifest": manifest}
    )
    assert "root" in detail
    manifest["root"] = None
    manifest["tensors"][0]["dtype"] = "NOPE"
    _unchanged(api, 422, "invalid", "POST", "/backbones", json={"name": "x", "manifest": manifest})
    _unchanged(api, 422, "invalid", "GET", f"/adapters/{2**40}", "reader")
    _unchanged(api, 422, "invalid", "GET", "/adapters/abc", "reader")
    _unchanged(api, 422, "invalid", "GET", "/adapters?state=bogus", "reader")
    _unchanged(api, 422, "invalid", "GET", f"/events?after={2**40}", "reader")
    _unchanged(api, 404, "not_found", "GET", "/no/such/route", "reader")


@pytest.fixture
def small_limit_api(database_url: str, tmp_path: Path) -> Iterator[Harness]:
    yield from build_harness(database_url, str(tmp_path / "blobs"), tmp_path, max_body_bytes=1000)


def test_oversized_bodies_are_refused(small_limit_api: Harness) -> None:
    api = small_limit_api
    make_world(api)
    data = b"x" * 1001
    digest = hashlib.sha256(data).hexdigest()
    detail = _unchanged(
        api, 413, "payload_too_large", "PUT", f"/blobs/{digest}", "publisher", content=data
    )
    assert "1000" in detail

    def chunks() -> Iterator[bytes]:  # no Content-Length: caught while streaming
        yield data[:600]
        yield data[600:]

    _unchanged(
        api, 413, "payload_too_large", "PUT", f"/blobs/{digest}", "publisher", content=chunks()
    )
    assert not api.store.exists(digest)
    ok = b"y" * 1000
    assert api.put_blob(ok) == hashlib.sha256(ok).hexdigest()


def test_odd_keys_and_content_types(sqlite_world: World) -> None:
    api = sqlite_world.api
    for key in ("²", "9" * 30, "-1", "../x"):
        _unchanged(api, 404, "not_found", "GET", f"/backbones/{key}", "reader")
    headers = {"Content-Type": "text/plain"}
    _unchanged(
        api, 422, "invalid", "POST", "/capabilities", content=b'{"name": "x"}', headers=headers
    )
    _unchanged(api, 422, "invalid", "GET", "/channels/prod?after=1&wait=nan", "reader")
    _unchanged(api, 422, "invalid", "POST", "/tokens", json={"name": "x", "role": "root"})
