"""Adapter registration with the fit checks, listing, lineage; on both databases."""

from __future__ import annotations

from factories import adapter_tensors, backbone_shapes, write_adapter
from harness import Harness, World


def test_versions_count_up_per_capability(world: World) -> None:
    first = world.adapter("write", seed=1)
    second = world.adapter("write", seed=2, label="write++", parent_id=first["id"])
    plan = world.adapter("plan", seed=3)
    assert (first["name"], second["name"], plan["name"]) == ("write@1", "write@2", "plan@1")
    assert second["label"] == "write++"
    assert second["parent_id"] == first["id"]
    assert first["state"] == "candidate"
    assert (first["rank"], first["alpha"]) == (4, 8.0)
    assert first["target_modules"] == ["q_proj", "v_proj"]
    assert first["created_by"] == "alice"
    assert first["backbone"] == world.backbone
    assert len(first["manifest_root"]) == 64


def test_list_filters_and_pages(world: World) -> None:
    api = world.api
    ids = [world.adapter("write", seed=s)["id"] for s in (1, 2, 3)]
    world.adapter("plan", seed=4)
    api.ok("POST", f"/adapters/{ids[0]}/approve", "approver", json={})
    page = api.ok("GET", "/adapters?capability=write&limit=2", "reader")
    assert page["total"] == 3
    assert [a["id"] for a in page["items"]] == ids[:2]
    rest = api.ok("GET", "/adapters?capability=write&limit=2&offset=2", "reader")
    assert [a["id"] for a in rest["items"]] == ids[2:]
    approved = api.ok("GET", "/adapters?state=approved", "reader")
    assert [a["id"] for a in approved["items"]] == [ids[0]]
    on_backbone = api.ok("GET", f"/adapters?backbone={world.backbone}", "reader")
    assert on_backbone["total"] == 4
    assert api.ok("GET", f"/adapters?backbone={'0' * 64}", "reader")["total"] == 0


def test_offset_stops_at_the_cap_and_points_to_after(world: World) -> None:
    api = world.api
    ids = [world.adapter("write", seed=s)["id"] for s in (1, 2)]
    deepest = api.ok("GET", "/adapters?offset=10000", "reader")
    assert (deepest["items"], deepest["total"]) == ([], 2)
    refused = api.fails(422, "invalid", "GET", "/adapters?offset=10001", "reader")
    assert "offset must be at most 10000" in str(refused)
    assert "after=" in str(refused)
    by_key = api.ok("GET", f"/adapters?after={ids[0]}", "reader")
    assert [a["id"] for a in by_key["items"]] == ids[1:]
    spec = api.client.get("/openapi.json").json()
    param = spec["paths"]["/v1/adapters"]["get"]["parameters"]
    offset = next(p for p in param if p["name"] == "offset")
    assert offset["schema"]["maximum"] == 10000
    assert "after" in offset["description"]


def test_tag_filters_in_every_order(world: World) -> None:
    api = world.api
    made = [
        world.adapter(cap, seed=s, tags={"team": f"t{s % 2}", "run": f"r{s % 3}"})
        for s, cap in enumerate(["write", "plan", "write", "plan", "write", "plan"], start=1)
    ]
    api.ok("POST", f"/adapters/{made[2]['id']}/approve", "approver", json={})
    team = [a for a in made if a["tags"]["team"] == "t1"]
    both = [a for a in team if a["tags"]["run"] == "r0"]
    keys = {
        "oldest": lambda a: a["id"],
        "newest": lambda a: -a["id"],
        "name": lambda a: (a["capability"], a["version"]),
    }
    for sort, key in keys.items():
        for tags, expected in (("tag=team=t1", team), ("tag=team=t1&tag=run=r0", both)):
            found = api.ok("GET", f"/adapters?{tags}&sort={sort}&limit=2&offset=1", "reader")
            ordered = [a["id"] for a in sorted(expected, key=key)]
            assert [a["id"] for a in found["items"]] == ordered[1:3]
            assert (found["total"], found["total_exact"]) == (len(expected), True)
    approved = api.ok("GET", "/adapters?tag=team=t1&state=approved", "reader")
    assert [a["id"] for a in approved["items"]] == [made[2]["id"]]
    assert api.ok("GET", "/adapters?tag=team=t1&capability=write", "reader")["total"] == 3
    assert api.ok("GET", "/adapters?tag=team=t0&capability=write", "reader")["total"] == 0


def test_show_and_lineage(world: World) -> None:
    api = world.api
    v1 = world.adapter("write", seed=1)
    v2 = world.adapter("write", seed=2, parent_id=v1["id"])
    v3 = world.adapter("write", seed=3, parent_id=v2["id"])
    branch = world.adapter("write", seed=4, parent_id=v1["id"])
    assert api.ok("GET", f"/adapters/{v2['id']}", "reader") == v2
    lineage = api.ok("GET", f"/adapters/{v2['id']}/lineage", "reader")
    assert [a["id"] for a in lineage["ancestors"]] == [v1["id"]]
    assert lineage["adapter"]["id"] == v2["id"]
    assert [a["id"] for a in lineage["descendants"]] == [v3["id"]]
    root = api.ok("GET", f"/adapters/{v1['id']}/lineage", "reader")
    assert [a["id"] for a in root["descendants"]] == [v2["id"], v3["id"], branch["id"]]
    api.fails(404, "not_found", "GET", "/adapters/999", "reader")


def test_parent_must_share_capability_and_backbone(world: World) -> None:
    plan = world.adapter("plan", seed=1)
    detail = world.api.fails(
        422,
        "incompatible_adapter",
        "POST",
        "/adapters",
        "publisher",
        json=world.api.adapter_body("write", world.backbone, 2, parent_id=plan["id"]),
    )
    assert "same capability" in detail
    world.api.fails(
        404,
        "not_found",
        "POST",
        "/adapters",
        "publisher",
        json=world.api.adapter_body("write", world.backbone, 2, parent_id=4242),
    )


def _files_of(api: Harness, directory_name: str, **kw: object) -> dict[str, str]:
    from factories import adapter_files

    directory = write_adapter(api.tmp / directory_name, **kw)  # type: ignore[arg-type]
    return {name: api.put_blob(data) for name, data in adapter_files(directory).items()}


def test_shape_mismatch_lists_every_problem(world: World) -> None:
    api = world.api
    wide = backbone_shapes(hidden=48)
    files = _files_of(api, "wide", shapes=wide)
    detail = api.fails(
        422,
        "incompatible_adapter",
        "POST",
        "/adapters",
        "publisher",
        json=api.adapter_body("write", world.backbone, files=files),
    )
    assert len(detail["problems"]) == 8  # 2 layers x 2 modules x (A, B)
    assert "expected [4, 32]" in " ".join(detail["problems"])


def test_rank_config_and_tensor_names_are_checked(world: World) -> None:
    api = world.api
    shapes = backbone_shapes()
    tensors = adapter_tensors(shapes, r=4)
    files = _files_of(api, "rank", tensors=tensors, r=8)
    detail = api.fails(
        422,
        "incompatible_adapter",
        "POST",
        "/adapters",
        "publisher",
        json=api.adapter_body("write", world.backbone, files=files),
    )
    assert any("expected [8, 32]" in p for p in detail["problems"])
    renamed = {k.replace("q_proj", "x_proj"): v for k, v in tensors.items()}
    files = _files_of(api, "renamed", tensors=renamed)
    detail = api.fails(
        422,
        "incompatible_adapter",
        "POST",
        "/adapters",
        "publisher",
        json=api.adapter_body("write", world.backbone, files=files),
    )
    assert any("no backbone tensor" in p for p in detail["problems"])
    bad_config = _files_of(api, "cfg", config={"peft_type": "LORA", "r": "four"})
    detail = api.fails(
        422,
        "incompatible_adapter",
        "POST",
        "/adapters",
        "publisher",
        json=api.adapter_body("write", world.backbone, files=bad_config),
    )
    assert any("r must be a positive integer" in p for p in detail["problems"])


def test_adapter_for_another_backbone_is_refused(world: World) -> None:
    api = world.api
    other = api.backbone("other", seed=7)  # same shapes, different weights
    wide_root = api.ok(
        "POST",
        "/backbones",
        json={"name": "wide", "manifest": _wide_manifest(api)},
    )["root"]
    files = api.upload_adapter(seed=1)
    assert (
        api.ok(
            "POST",
            "/adapters",
            "publisher",
            json=api.adapter_body("write", other["root"], files=files),
        )["backbone"]
        == other["root"]
    )
    api.fails(
        422,
        "incompatible_adapter",
        "POST",
        "/adapters",
        "publisher",
        json=api.adapter_body("write", wide_root, files=files),
    )


def _wide_manifest(api: Harness) -> dict[str, object]:
    from factories import backbone_manifest_json, write_backbone

    return backbone_manifest_json(write_backbone(api.tmp / "wide-bb", hidden=48))


def test_states_of_many_versions_in_one_request(world: World) -> None:
    api = world.api
    first, second, third = (world.adapter("write", seed=s) for s in (1, 2, 3))
    api.ok("POST", f"/adapters/{second['id']}/approve", "approver", json={})
    api.ok("POST", f"/adapters/{third['id']}/reject", "approver", json={})
    ids = [third["id"], 999, first["id"], second["id"], first["id"]]
    query = "&".join(f"id={i}" for i in ids)
    answer = api.ok("GET", f"/adapters/states?{query}", "reader")
    assert answer == {
        "states": [
            {"id": first["id"], "state": "candidate"},
            {"id": second["id"], "state": "approved"},
            {"id": third["id"], "state": "rejected"},
        ]
    }
    api.fails(422, "invalid", "GET", "/adapters/states", "reader")
    api.fails(422, "invalid", "GET", "/adapters/states?id=0", "reader")
    too_many = "&".join(f"id={i}" for i in range(1, 1002))
    api.fails(422, "invalid", "GET", f"/adapters/states?{too_many}", "reader")
    api.fails(401, "unauthorized", "GET", f"/adapters/states?id={first['id']}", None)
