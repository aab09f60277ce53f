"""The CLI's one-line error messages and its CAP=ID parsing (no server needed)."""

from __future__ import annotations

import click
import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from registry import errors
from registry.cli.base import describe_error
from registry.cli.channels import parse_assignments
from registry.client import translate
from storage.errors import DigestMismatchError as StorageDigestMismatch

GATE_REPORT = {
    "passed": False,
    "checks": [
        {"benchmark": "old-tasks", "verdict": "fail"},
        {"benchmark": "fresh", "verdict": "pass"},
        {"benchmark": "lib", "verdict": "missing"},
    ],
}


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (errors.NotFoundError("adapter 9 not found"), "not_found: adapter 9 not found"),
        (
            errors.IncompatibleAdapterError(
                {"message": "adapter does not fit", "problems": ["a: shape", "b: missing"]}
            ),
            "incompatible_adapter: adapter does not fit: a: shape; b: missing",
        ),
        (
            errors.DigestMismatchError({"message": "bytes differ", "expected": "a", "actual": "b"}),
            "digest_mismatch: bytes differ",
        ),
        (
            errors.InvalidError(
                [
                    {"loc": ["body", "name"], "msg": "field required", "type": "missing"},
                    {"loc": ["body", "order"], "msg": "not an int", "type": "int"},
                ]
            ),
            "invalid: body.name: field required; body.order: not an int",
        ),
        (errors.RevisionConflictError({"x": 1}), 'revision_conflict: {"x":1}'),
        (
            errors.GateFailedError(GATE_REPORT),
            "gate_failed: promotion refused by the gate (old-tasks, lib)",
        ),
        (errors.ForbiddenError("line one\nline two"), "forbidden: line one line two"),
        (StorageDigestMismatch("a" * 4, "b" * 4), "sha256 mismatch: expected aaaa, got bbbb"),
        (FileExistsError("x exists"), "x exists"),
    ],
)
def test_errors_read_as_one_line(exc: BaseException, expected: str) -> None:
    assert describe_error(exc) == expected


def test_transport_errors_name_the_request() -> None:
    request = httpx.Request("GET", "http://127.0.0.1:9/v1/channels/prod?after=1")
    refused = translate(httpx.ConnectError("[Errno 111] Connection refused", request=request))
    assert describe_error(refused) == (
        "unavailable: cannot reach the registry (GET http://127.0.0.1:9/v1/channels/prod): "
        "[Errno 111] Connection refused"
    )
    slow = translate(httpx.ReadTimeout("timed out", request=request))
    assert describe_error(slow) == (
        "timeout: the registry did not answer in time "
        "(GET http://127.0.0.1:9/v1/channels/prod): ReadTimeout"
    )
    broken = translate(httpx.ReadError("reset", request=request), received=7)
    assert describe_error(broken) == (
        "transfer_failed: the transfer from the registry broke off after 7 bytes "
        "(GET http://127.0.0.1:9/v1/channels/prod): reset"
    )
    assert describe_error(translate(httpx.ConnectError("boom"))) == (
        "unavailable: cannot reach the registry: boom"
    )


def test_long_details_are_cut() -> None:
    line = describe_error(errors.InvalidError("x" * 5000))
    assert len(line) < 450
    assert line.endswith("...")


@pytest.mark.parametrize(
    ("pairs", "expected"),
    [
        ([], {}),
        (["plan=1", "write=12"], {"plan": "plan@1", "write": "write@12"}),
        (
            ["write=#6", "plan@3", "search=search@2"],
            {"write": "#6", "plan": "plan@3", "search": "search@2"},
        ),
        (["write=", "code=none", "x=NULL"], {"write": None, "code": None, "x": None}),
        (["plan=1", "plan=2"], {"plan": "plan@2"}),
    ],
)
def test_assignments(pairs: list[str], expected: dict[str, str | None]) -> None:
    """`write=2` means version 2 of write (`write@2`), `write=#6` the id 6."""
    assert parse_assignments(pairs) == expected


@pytest.mark.parametrize(
    "bad", ["plan", "=3", "plan=x", "plan=-1", "plan=1.5", "plan=write@2", "plan=#0"]
)
def test_bad_assignments_are_usage_errors(bad: str) -> None:
    with pytest.raises(click.BadParameter):
        parse_assignments([bad])


@given(
    st.dictionaries(st.from_regex(r"[a-z][a-z0-9_+-]{0,15}", fullmatch=True), st.integers(1, 10**8))
)
def test_assignments_round_trip(mapping: dict[str, int]) -> None:
    named = {cap: f"{cap}@{version}" for cap, version in mapping.items()}
    assert parse_assignments([f"{cap}={v}" for cap, v in mapping.items()]) == named
    assert parse_assignments([f"{cap}=#{v}" for cap, v in mapping.items()]) == {
        cap: f"#{v}" for cap, v in mapping.items()
    }
