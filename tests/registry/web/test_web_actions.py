"""The forms that change state (approver): promote, rollback, revoke, and their refusals as
pages with the API's status; every refusal leaves the registry as it was."""

from __future__ import annotations

import html
import re

import pytest
from webworld import Site, hidden


def head(site: Site) -> dict[str, object]:
    return dict(site.api.ok("GET", "/channels/prod", "reader"))


def test_promote_through_the_form(any_site: Site) -> None:
    site = any_site
    plan2 = site.approved("plan", seed=21)  # no benchmark covers plan: the gate passes
    csrf = site.sign_in("approver")
    page = site.api.client.get("/channels/prod").text
    assert hidden(page, "expected_revision") == "2"
    assert f'<option value="{plan2}">plan@2</option>' in page  # approved, not in the head
    form = {"csrf": csrf, "adapter.plan": str(plan2), "adapter.search": "", "order": ""}
    answer = site.post("/channels/prod/promote", {**form, "expected_revision": "2", "reason": "r"})
    assert answer.status_code == 303, answer.text[answer.text.find("<main>") :]
    assert answer.headers["location"] == "/channels/prod?done=promote"
    current = head(site)
    assert current["revision"] == 3
    assert current["reason"] == "r"
    assert current["library"]["plan"]["adapter_id"] == plan2  # type: ignore[index]
    assert current["library"]["search"]["name"] == "search@1"  # type: ignore[index]
    assert current["order"] == ["plan", "search", "write"]  # a blank order keeps it
    page = site.api.client.get(answer.headers["location"]).text
    assert "plan: plan@1 → plan@2" in html.unescape(page)


def test_rollback_and_revoke_through_the_forms(any_site: Site) -> None:
    site = any_site
    csrf = site.sign_in("approver")
    rolled = site.post("/channels/prod/rollback", {"csrf": csrf, "to_revision": "1"})
    assert rolled.status_code == 303
    assert head(site)["revision"] == 3
    assert "Rolled back" in site.api.client.get(rolled.headers["location"]).text
    write1 = site.ids["write@1"]
    revoked = site.post(f"/adapters/{write1}/revoke", {"csrf": csrf, "reason": "leaks"})
    assert revoked.status_code == 303
    assert site.adapter("write@1")["state"] == "revoked"
    current = head(site)
    assert current["revision"] == 4
    assert "write" not in current["library"]  # type: ignore[operator]
    assert current["reason"] == "revoke write@1: leaks; order now plan -> search"
    page = site.api.client.get(f"/adapters/{write1}").text
    assert re.search(r"<dt>revoked</dt><dd>by \S+ · <time[^>]*>[^<]*</time>: leaks</dd>", page)


def test_a_refused_gate_is_a_409_page_with_its_report(shared_site: Site) -> None:
    csrf = shared_site.sign_in("approver")
    before = head(shared_site)
    form = {"csrf": csrf, "adapter.write": str(shared_site.ids["write@3"])}
    answer = shared_site.post("/channels/prod/promote", form)
    assert answer.status_code == 409
    text = html.unescape(re.sub(r"<[^>]+>", " ", answer.text))
    assert "the gate refused the promotion" in text
    assert re.search(r"write-quality\s+v1\s+write\s+0\.86\s+0\.5\s+-0\.36", text)
    assert head(shared_site) == before


@pytest.mark.parametrize(
    ("path", "form", "status", "code"),
    [
        ("/channels/prod/promote", {}, 422, "invalid"),  # changes nothing
        ("/channels/prod/promote", {"adapter.write": "999"}, 404, "not_found"),
        ("/channels/prod/promote", {"adapter.write": "abc"}, 422, "invalid"),
        ("/channels/prod/promote", {"order": "plan,nope"}, 404, "not_found"),
        ("/channels/prod/promote", {"expected_revision": "1", "order": "write"}, 409, None),
        ("/channels/prod/rollback", {"to_revision": "2"}, 422, "invalid"),
        ("/channels/prod/rollback", {"to_revision": ""}, 422, "invalid"),
        ("/channels/nope/rollback", {"to_revision": "1"}, 404, "not_found"),
        ("/channels/NOPE/rollback", {"to_revision": "1"}, 422, "invalid"),
        ("/adapters/{write@4}/revoke", {}, 409, "invalid_state"),
        ("/adapters/{write@1}/approve", {}, 409, "invalid_state"),
        ("/adapters/999/approve", {}, 404, "not_found"),
        ("/adapters/{write@4}/bless", {}, 422, "invalid"),
        ("/adapters/{write@4}/approve", {"reason": "x" * 5000}, 422, "invalid"),
    ],
)
def test_refused_forms_change_nothing(
    shared_site: Site, path: str, form: dict[str, str], status: int, code: str | None
) -> None:
    csrf = shared_site.sign_in("approver")
    before = shared_site.api.counts()
    target = re.sub(r"\{([^}]+)\}", lambda m: str(shared_site.ids[m.group(1)]), path)
    answer = shared_site.post(target, {"csrf": csrf, **form})
    assert answer.status_code == status, answer.text
    if code is not None:
        assert f'data-code="{code}"' in answer.text
    assert shared_site.api.counts() == before


def test_nobody_approves_what_they_published(shared_site: Site) -> None:
    """alice published write@4; her approver token may not approve it (the service's rule)."""
    answer = shared_site.post(
        f"/adapters/{shared_site.ids['write@4']}/approve",
        {},
        headers=shared_site.api.auth("self_approver"),
    )
    assert answer.status_code == 403
    assert "cannot approve it" in html.unescape(answer.text)
    assert shared_site.adapter("write@4")["state"] == "candidate"
