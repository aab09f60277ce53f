"""Schemathesis over the app's own OpenAPI document, with a token of each role.

Every operation gets bounded examples (valid and invalid data) from each role on a
registry that holds a backbone, capabilities, adapters in every state and a channel.
Checks: all of schemathesis's (the `--checks all` of its CLI: no 5xx, every status, header,
content type and body as documented, invalid data rejected, valid data accepted, 405 with
`Allow` for an undocumented method, ...). Failures are collected over every operation and
role and reported together; the request count is printed (visible without -s).
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from harness import PRINCIPALS, Harness, World, build_harness, make_world
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import CHECKS as REGISTERED
from schemathesis.checks import load_all_checks

load_all_checks()
CHECKS = REGISTERED.get_all()  # `--checks all`
# A schema-valid request may still be refused by a domain rule the schema cannot state
# (files that do not fit their backbone, an adapter that is not approved, a principal name
# that is not NFKC): 422 with the reason. The rest of the expected statuses are the check's.
POSITIVE_ALSO = ["422"]
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


def _fuzz(
    schema: schemathesis.BaseSchema, token: str, counts: Counter[int], failures: list[str]
) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    for result in schema.get_all_operations():
        operation = result.ok()

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy())
        def run(case: schemathesis.Case) -> None:
            response = case.call(headers=headers)
            counts[response.status_code] += 1
            case.validate_response(response, checks=CHECKS, headers=headers)

        try:
            run()
        except (Exception, BaseExceptionGroup) as exc:  # noqa: BLE001 - all reported together
            failures.append(f"{operation.label}: {str(exc)[:1500]}")


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
    accepted = schema.config.checks.positive_data_acceptance
    accepted.expected_statuses = [*accepted.expected_statuses, *POSITIVE_ALSO]
    counts: Counter[int] = Counter()
    failures: list[str] = []
    for role in ROLES:
        _fuzz(schema, api.tokens[role], counts, failures)
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
