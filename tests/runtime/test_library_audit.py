"""runtime.sync.library_audit: what is resident and offered, against the revision served."""

from __future__ import annotations

import pytest

from runtime.engine import AdapterSpec, AuditReport
from runtime.sync import library_audit

BACKBONE = "b" * 64
ROOTS = {"plan": "1" * 64, "search": "2" * 64, "write": "3" * 64}


def revision(*capabilities: str, number: int = 5) -> dict:
    library = {
        c: {"adapter_id": i, "name": f"{c}@1", "manifest_root": ROOTS[c], "files": {}}
        for i, c in enumerate(capabilities, 1)
    }
    return {"revision": number, "backbone": BACKBONE, "library": library, "order": []}


def offered(*capabilities: str, versions: dict[str, str] | None = None) -> dict:
    versions = versions or {}
    return {
        c: AdapterSpec(c, f"/lib/{c}", version=versions.get(c, f"{c}@1"), manifest_root=ROOTS[c])
        for c in capabilities
    }


def report(adapters: dict[str, str], backbone: str = BACKBONE, ok: bool = True) -> AuditReport:
    return AuditReport(ok, backbone, adapters)


def test_exactly_the_revisions_library_passes() -> None:
    checked = library_audit(
        report({"plan": ROOTS["plan"], "search": ROOTS["search"]}),
        offered("plan", "search"),
        revision("plan", "search"),
    )
    assert checked.ok, checked.detail
    assert checked.detail == ""


def test_versions_kept_for_open_episodes_are_named_not_failed() -> None:
    checked = library_audit(
        report({"plan": ROOTS["plan"], "write@1": ROOTS["write"]}),
        offered("plan"),
        revision("plan"),
    )
    assert checked.ok
    assert checked.detail == "resident for open episodes only: write@1"


@pytest.mark.parametrize(
    ("resident", "offer", "served", "problem"),
    [
        # a revoked capability still offered (the bug: the audit only looked at loaded roots)
        (
            {"plan": ROOTS["plan"], "write": ROOTS["write"]},
            offered("plan", "write"),
            revision("plan"),
            "'write' is offered but not in revision 5",
        ),
        ({"plan": ROOTS["plan"]}, offered("plan"), revision("plan", "search"), "'search' of rev"),
        (
            {"write": ROOTS["write"]},
            offered("write", versions={"write": "write@2"}),
            revision("write"),
            "'write' offers write@2, revision write@1",
        ),
        ({"plan": "9" * 64}, offered("plan"), revision("plan"), "'plan': resident root 999"),
        ({}, offered("plan"), revision("plan"), "'plan': resident root None"),
    ],
)
def test_any_difference_fails(resident, offer, served, problem) -> None:
    checked = library_audit(report(resident), offer, served)
    assert not checked.ok
    assert problem in checked.detail


def test_another_backbone_or_a_failed_engine_audit_fails() -> None:
    other = library_audit(report({}, backbone="c" * 64), {}, revision())
    assert not other.ok
    assert "backbone ccc" in other.detail
    engine_failed = AuditReport(False, BACKBONE, {}, "adapter 'x': resident != expected")
    checked = library_audit(engine_failed, {}, revision())
    assert not checked.ok
    assert checked.detail == "adapter 'x': resident != expected"
