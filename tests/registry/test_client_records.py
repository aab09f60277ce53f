"""The client's record types and the API's response schemas describe the same JSON.

Each `TypedDict` of `registry.client.records` is paired with the pydantic response schema of
`registry/api/schemas.py` it mirrors; every response schema and every record must be in a
pair. A pair must have the same field names, each field the same JSON shape (a `datetime`
is a string on the wire, an enum or a `Literal` of strings a string whose values, where both
sides list them, agree) and the same optionality (`X | None` on both sides or neither).
So a field added, removed, renamed or made nullable on one side fails here until the other
side follows.
"""

from __future__ import annotations

import enum
import inspect
import types
import typing
from datetime import datetime
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import pytest
from pydantic import BaseModel

from registry.api import schemas
from registry.client import records
from registry.domain import AdapterState, Role

PAIRS: dict[type, type[BaseModel]] = {
    records.Health: schemas.Health,
    records.TokenCreated: schemas.TokenCreated,
    records.TokenInfo: schemas.TokenPublic,
    records.Backbone: schemas.BackbonePublic,
    records.Capability: schemas.CapabilityPublic,
    records.Adapter: schemas.AdapterPublic,
    records.AdapterPage: schemas.AdapterPage,
    records.Lineage: schemas.LineagePublic,
    records.Benchmark: schemas.BenchmarkPublic,
    records.Evaluation: schemas.EvaluationPublic,
    records.EvaluationDetail: schemas.EvaluationDetail,
    records.LibraryEntry: schemas.LibraryEntryPublic,
    records.Revision: schemas.RevisionPublic,
    records.GateCheck: schemas.GateCheckPublic,
    records.GateReport: schemas.GateReportPublic,
    records.PromoteResult: schemas.PromotePublic,
    records.Node: schemas.NodePublic,
    records.Event: schemas.EventPublic,
    records.EventsVerification: schemas.VerifyPublic,
}
RECORD_OF = {model: record for record, model in PAIRS.items()}

Shape = Any  # "str", ("list", Shape), ("dict", Shape, Shape), ("record", name), ...


def shape(tp: Any) -> tuple[bool, Shape]:
    """(nullable, JSON shape) of an annotation, on either side."""
    args = get_args(tp)
    if get_origin(tp) in (Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        assert len(rest) == 1, f"unions other than X | None are not JSON records: {tp}"
        return len(rest) < len(args), shape(rest[0])[1]
    return False, _kind(tp)


def _kind(tp: Any) -> Shape:
    origin, args = get_origin(tp), get_args(tp)
    if origin is Literal:
        assert all(isinstance(a, str) for a in args), tp
        return ("str", frozenset(args))
    if origin is list:
        return ("list", shape(args[0]))
    if origin is dict:
        return ("dict", shape(args[0]), shape(args[1]))
    if tp is Any:
        return "any"
    if tp is datetime or tp is str:
        return ("str", None)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return ("str", frozenset(m.value for m in tp))
    if typing.is_typeddict(tp):
        return ("record", tp.__name__)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return ("record", RECORD_OF[tp].__name__ if tp in RECORD_OF else f"unpaired {tp}")
    if tp in (int, float, bool):
        return tp.__name__
    raise AssertionError(f"no JSON shape for {tp!r}")


def record_fields(record: type) -> dict[str, tuple[bool, Shape]]:
    hints = get_type_hints(record)
    assert record.__required_keys__ == set(hints), f"{record.__name__}: optional keys"
    return {name: shape(tp) for name, tp in hints.items()}


def schema_fields(model: type[BaseModel]) -> dict[str, tuple[bool, Shape]]:
    return {name: shape(field.annotation) for name, field in model.model_fields.items()}


def differences(record: type, model: type[BaseModel]) -> list[str]:
    """What differs between a record and a schema; empty when they describe the same JSON."""
    client, server = record_fields(record), schema_fields(model)
    found = [f"{name}: only in the client's {record.__name__}" for name in client.keys() - server]
    found += [f"{name}: only in the API's {model.__name__}" for name in server.keys() - client]
    for name in sorted(client.keys() & server.keys()):
        (c_null, c_shape), (s_null, s_shape) = client[name], server[name]
        if c_null != s_null:
            found.append(f"{name}: nullable in {'the client' if c_null else 'the API'} only")
        if not _same(c_shape, s_shape):
            found.append(f"{name}: client {c_shape} != API {s_shape}")
    return found


def _same(a: Shape, b: Shape) -> bool:
    """Equal shapes; a string listing its values matches a plain string (one side is laxer)."""
    if a == b:
        return True
    if not (isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) and a[0] == b[0]):
        return False
    if a[0] == "str":
        return a[1] is None or b[1] is None
    if a[0] in ("list", "dict"):  # items are (nullable, shape)
        return all(x[0] == y[0] and _same(x[1], y[1]) for x, y in zip(a[1:], b[1:], strict=True))
    return False


@pytest.mark.parametrize("record", PAIRS, ids=lambda r: r.__name__)
def test_each_record_matches_its_response_schema(record: type) -> None:
    assert differences(record, PAIRS[record]) == []


def test_every_response_schema_and_every_record_is_paired() -> None:
    responses = {
        cls
        for _, cls in inspect.getmembers(schemas, inspect.isclass)
        if issubclass(cls, schemas.Out) and cls is not schemas.Out
    }
    typed = {cls for _, cls in inspect.getmembers(records) if typing.is_typeddict(cls)}
    assert responses == set(PAIRS.values()), "pair the new response schema with a record"
    assert typed == set(PAIRS), "pair the new record with its response schema"


def test_the_check_sees_a_field_added_dropped_or_made_nullable() -> None:
    """The comparison is not vacuous: each kind of drift on either side is reported."""

    class AdapterPlus(schemas.AdapterPublic):
        stars: dict[str, str]

    class NullableName(schemas.CapabilityPublic):
        name: str | None  # type: ignore[assignment]

    class RevisionWithoutReason(typing.TypedDict):
        channel: str

    class DatedCapability(schemas.CapabilityPublic):
        order: datetime | None  # type: ignore[assignment]

    assert differences(records.Adapter, AdapterPlus) == ["stars: only in the API's AdapterPlus"]
    assert differences(records.Capability, NullableName) == ["name: nullable in the API only"]
    assert "order: client int != API ('str', None)" in differences(
        records.Capability, DatedCapability
    )
    missing = differences(RevisionWithoutReason, schemas.RevisionPublic)
    assert "reason: only in the API's RevisionPublic" in missing
    assert len(missing) == len(schemas.RevisionPublic.model_fields) - 1


def test_literal_values_agree_with_the_server_enums() -> None:
    assert shape(records.State) == (False, ("str", frozenset(s.value for s in AdapterState)))
    assert shape(records.Role) == (False, ("str", frozenset(r.value for r in Role)))
