"""Schemathesis over the app's own OpenAPI document, with a token of each role.

Every operation gets bounded examples (valid and invalid data) from each role on a
registry that holds a backbone, capabilities, adapters in every state and a channel.
Checks: all of schemathesis's (the `--checks all` of its CLI: no 5xx, every status, header,
content type and body as documented, invalid data rejected, valid data accepted, 405 with
`Allow` for an undocumented method, ...), with schemathesis's own expected statuses for
valid data: the document states what the services check (name and digest patterns, no NUL
in any string, tag shapes, ...), so a schema-valid request is accepted, or answered 403,
404 or 409 by the registry's state. Two kinds of rule no schema can state are handled
narrowly: a blob upload's URL is made the sha256 of its bytes (`_with_relations`), and
`UNSTATABLE` names the few 422 reasons a valid request may still get. Failures are collected
over every operation and role and reported together; the request count is printed (visible
without -s).
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from factories import sha256_bytes
from harness import PRINCIPALS, Harness, World, build_harness, make_world
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import CHECKS as REGISTERED
from schemathesis.checks import load_all_checks
from schemathesis.core.failures import FailureGroup
from schemathesis.openapi.checks import RejectedPositiveData

load_all_checks()
CHECKS = REGISTERED.get_all()  # `--checks all`
# Rules no JSON Schema can state, each refused as 422 `invalid` with a reason starting so:
# a schema-valid request refused for one of these is not a failure; any other refusal of a
# schema-valid request is (everything else the services check, the schema says).
UNSTATABLE = {
    # NFKC form and Unicode categories (control, format, unassigned, ...): registry.principals
    "POST /v1/tokens": ("principal name ",),
    # a stated root that is not the one the tensors give; a parameter count (the sum of the
    # products of the shapes) over what a BIGINT holds
    "POST /v1/backbones": ("invalid manifest: stated root ", "a backbone manifest of over "),
    # TUF root metadata: its signatures, roles and expiry (python-tuf's Metadata parser)
    "POST /v1/trust/root": ("the published root: ",),
}
EXAMPLES = 6
ROLES = [key for key in PRINCIPALS if key != "self_approver"]


@pytest.fixture
def fuzz_world(database_url: str, tmp_path: Path) -> Iterator[World]:
    harness = build_harness(
        database_url, str(tmp_path / "blobs"), tmp_path, long_poll_max_s=0.2, max_json_bytes=65536
    )
    api: Harness = next(harness)
    world = make_world(api)
    approved = world.approved("write", seed=1)
    world.approved("plan", seed=2)
    world.adapter("search", seed=3)
    rejected = world.adapter("write", seed=4)
    api.ok("POST", f"/adapters/{rejected['id']}/reject", "approver", json={})
    world.promote({"write": approved["id"]})
    yield world
    next(harness, None)


def _with_relations(case: schemathesis.Case) -> schemathesis.Case:
    """A positive case made to hold what no schema can state: a blob's URL names the
    sha256 of its bytes. Negative cases are left as generated."""
    meta = case.meta
    positive = meta is not None and meta.generation.mode.is_positive
    if positive and case.operation.label == "PUT /v1/blobs/{digest}":
        body = case.body if isinstance(case.body, bytes) else b""
        case.body = body
        case.path_parameters = {**(case.path_parameters or {}), "digest": sha256_bytes(body)}
    return case


def _unstatable(case: schemathesis.Case, response: Any, group: FailureGroup) -> bool:
    """Whether the only failure is a schema-valid request refused for an UNSTATABLE rule."""
    reasons = UNSTATABLE.get(case.operation.label)
    if reasons is None or response.status_code != 422:
        return False
    if not all(isinstance(f, RejectedPositiveData) for f in group.exceptions):
        return False
    body = response.json()
    return body["error"] == "invalid" and str(body["detail"]).startswith(reasons)


def _fuzz(
    schema: schemathesis.BaseSchema, tokens: dict[str, str], counts: Counter[int],
    failures: list[str],
) -> None:  # fmt: skip
    """Every operation's examples, each sent with every role's token in turn: one generation
    serves all roles (derandomized, each role was given the same examples anyway)."""
    for result in schema.get_all_operations():
        operation = result.ok()

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy().map(_with_relations))
        def run(case: schemathesis.Case) -> None:
            for role, token in tokens.items():
                headers = {"Authorization": f"Bearer {token}"}
                response = case.call(headers=headers)
                counts[response.status_code] += 1
                try:
                    case.validate_response(response, checks=CHECKS, headers=headers)
                except FailureGroup as group:
                    if not _unstatable(case, response, group):
                        group.add_note(f"as {role}")
                        raise

        try:
            run()
        except (Exception, BaseExceptionGroup) as exc:  # noqa: BLE001 - all reported together
            notes = " ".join(getattr(exc, "__notes__", []))
            failures.append(f"{operation.label} {notes}: {str(exc)[:1500]}")


# PostgreSQL takes twice as long; the SQLite run is in `make test`, both in `make test-slow`.
@pytest.mark.parametrize(
    "database_url",
    ["sqlite", pytest.param("postgresql", marks=[pytest.mark.postgres, pytest.mark.slow])],
    indirect=True,
)
def test_every_operation_keeps_its_documented_contract(
    fuzz_world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    api = fuzz_world.api
    schema = schemathesis.openapi.from_asgi("/openapi.json", api.client.app)
    counts: Counter[int] = Counter()
    failures: list[str] = []
    _fuzz(schema, {role: api.tokens[role] for role in ROLES}, counts, failures)
    total = sum(counts.values())
    with capsys.disabled():
        sys.stdout.write(
            f"\nschemathesis (all {len(CHECKS)} checks): {total} requests over {len(ROLES)} "
            f"roles, statuses {dict(sorted(counts.items()))}, {len(failures)} failures\n"
        )
    assert not failures, "\n\n".join(failures)
    assert total > 100
    assert not [status for status in counts if status >= 500]
    assert api.ok("GET", "/events/verify", "reader")["ok"]
