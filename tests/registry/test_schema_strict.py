"""What the strict schemathesis run (test_fuzz_openapi) made the API and its document say
(issue 25): the rules the services check are in the schema, and requests that are valid by
it are refused only by the registry's state (403, 404, 409), never by a hidden 422.
On SQLite and PostgreSQL, over the API."""

from __future__ import annotations

import re
from typing import Any

from harness import Harness, World
from jsonschema import Draft202012Validator

from registry.api.schema_types import NUL_FREE, TAG_FILTER
from registry.names import NODE_ID_RE


def _request_schemas(document: dict[str, Any]) -> list[str]:
    """The names of the component schemas request bodies refer to."""
    names = []
    for path in document["paths"].values():
        for operation in path.values():
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if body:
                names.append(body["schema"]["$ref"].rsplit("/", 1)[1])
    return names


def _subschemas(schema: Any, where: str) -> list[tuple[str, dict[str, Any]]]:
    """Every schema object under ``schema`` (itself included), with where it is."""
    found = []
    if isinstance(schema, dict):
        found.append((where, schema))
        for key, sub in schema.items():
            found += _subschemas(sub, f"{where}.{key}")
    elif isinstance(schema, list):
        for i, sub in enumerate(schema):
            found += _subschemas(sub, f"{where}[{i}]")
    return found


def _plain_strings(schema: Any, where: str) -> list[str]:
    """Every string schema under ``schema`` that has neither a pattern nor an enum."""
    return [
        at
        for at, sub in _subschemas(schema, where)
        if sub.get("type") == "string" and not {"pattern", "enum", "const"} & set(sub)
    ]


def _open_objects(schema: Any, where: str) -> list[str]:
    """Every object schema under ``schema`` that takes any value (``additionalProperties:
    true``): its strings could hold a NUL the services refuse."""
    return [at for at, sub in _subschemas(schema, where) if sub.get("additionalProperties") is True]


def test_every_string_of_a_request_body_says_what_it_accepts(api: Harness) -> None:
    document = api.client.get("/openapi.json").json()
    components = document["components"]["schemas"]
    names = _request_schemas(document)
    assert {"TokenCreate", "AdapterCreate", "SignatureCreate", "HeartbeatIn"} <= set(names)
    plain = [p for name in names for p in _plain_strings(components[name], name)]
    assert not plain, plain
    # schemathesis found a TUF root whose nested string held a NUL: valid by `additionalProperties:
    # true`, refused with 422
    assert not [p for name in names for p in _open_objects(components[name], name)]
    # nested JSON (signatures, trainer settings) is NUL-free at every depth, keys included
    value = components["JsonValue"]["anyOf"]
    assert {"type": "string", "pattern": NUL_FREE} in value
    assert any(v.get("propertyNames") == {"pattern": NUL_FREE} for v in value)
    header = next(
        p
        for p in document["paths"]["/v1/channels/{name}"]["get"]["parameters"]
        if p["name"] == "x-weact-min-revision"
    )
    assert header["schema"]["type"] == "integer"  # not nullable: "null" is no revision


def test_node_ids_and_tag_filters_match_the_patterns_the_document_gives(api: Harness) -> None:
    for good in ("gpu-1", "a.b:c_d", "a."):
        assert NODE_ID_RE.fullmatch(good)
    for bad in ("a..b", ".a", "", "a b"):
        assert not NODE_ID_RE.fullmatch(bad)
        api.fails(422, "invalid", "POST", "/tokens",
                  json={"name": "n", "role": "node", "node_id": bad})  # fmt: skip
    assert re.fullmatch(TAG_FILTER, "team=a=b")
    assert not re.fullmatch(TAG_FILTER, "=v")
    api.fails(422, "invalid", "POST", "/tokens",
              json={"name": "n", "role": "reader", "node_id": "gpu-1"})  # fmt: skip


def test_a_new_channel_with_nothing_to_create_it_from_is_404(world: World) -> None:
    api = world.api
    for route in ("gate", "promote"):
        for adapters in ({}, {"write": None}, {"write": 99999}):
            body = {"adapters": adapters, "create": True}
            api.fails(404, "not_found", "POST", f"/channels/fresh/{route}", "approver", json=body)
    assert api.request("GET", "/channels/fresh", "reader").status_code == 404


def test_rebinding_a_token_that_is_not_a_node_token_is_409(api: Harness) -> None:
    reader = api.ok("POST", "/tokens", json={"name": "r", "role": "reader"})
    detail = api.fails(409, "conflict", "POST", "/nodes/gpu-1/rebind",
                       json={"token_id": reader["id"]})  # fmt: skip
    assert "only node tokens are bound" in detail


def test_a_backbone_too_big_to_count_is_422_not_500(api: Harness) -> None:
    big = [{"name": f"t{i}", "dtype": "U8", "shape": [2**31 - 1] * 3,
            "digest": "0" * 64} for i in range(2)]  # fmt: skip
    detail = api.fails(422, "invalid", "POST", "/backbones",
                       json={"name": "huge", "manifest": {"tensors": big}})  # fmt: skip
    assert "parameters" in detail


def test_an_evaluation_names_exactly_one_subject_in_the_document_as_in_the_api(
    world: World,
) -> None:
    """The rule ``give exactly one of library_digest and adapter_id`` is the document's too
    (schemathesis found a body valid by the document refused with 422 before it was)."""
    api = world.api
    document = api.client.get("/openapi.json").json()
    validator = Draft202012Validator(
        {"$ref": "#/components/schemas/EvaluationCreate", "components": document["components"]}
    )
    adapter = world.adapter("write", seed=1)
    world.benchmark("b", "write")
    base = {"benchmark": "b", "benchmark_version": 1, "score": 0.5, "n": 1}
    subjects = {"library_digest": "0" * 64, "adapter_id": adapter["id"]}
    for given in ({}, subjects, {"library_digest": None, "adapter_id": None}):
        body = {**base, **given}
        assert not validator.is_valid(body), body
        api.fails(422, "invalid", "POST", "/evaluations", "evaluator", json=body)
    for key, value in subjects.items():
        assert validator.is_valid({**base, key: value, "items_digest": None})
