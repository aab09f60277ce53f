"""Tag editing on a version's page (its publisher, approvers, admins; a form with the page's
CSRF token) and the audit log's filters (action or a family of actions, actor, subject)."""

from __future__ import annotations

import re

from test_pages import text_of
from webworld import Site


def test_the_publisher_sets_and_removes_tags(site: Site) -> None:
    write4 = site.ids["write@4"]
    csrf = site.sign_in("publisher")
    page = site.api.client.get(f"/adapters/{write4}").text
    assert f'action="/adapters/{write4}/tags"' in page
    answer = site.post(f"/adapters/{write4}/tags", {"csrf": csrf, "set": " stage=beta "})
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == f"/adapters/{write4}?done=tag#card"
    assert site.adapter("write@4")["tags"] == {"stage": "beta"}
    site.post(f"/adapters/{write4}/tags", {"csrf": csrf, "set": "dataset=kb-v3"})
    removed = site.post(f"/adapters/{write4}/tags", {"csrf": csrf, "remove.stage": "on"})
    assert removed.status_code == 303
    assert site.adapter("write@4")["tags"] == {"dataset": "kb-v3"}
    shown = site.api.client.get(f"/adapters/{write4}?done=tag").text
    assert "Tags saved." in shown
    assert 'name="remove.dataset"' in shown


def test_tag_edits_that_are_refused_change_nothing(site: Site) -> None:
    write4 = site.ids["write@4"]
    csrf = site.sign_in("publisher")
    for form, status in (
        ({"csrf": csrf}, 422),  # nothing to do
        ({"csrf": csrf, "set": "no equals sign"}, 422),
        ({"csrf": csrf, "remove.never": "on"}, 422),  # no such tag
        ({"csrf": "forged", "set": "a=b"}, 403),
    ):
        answer = site.post(f"/adapters/{write4}/tags", form)
        assert answer.status_code == status, (form, answer.text)
        assert answer.headers["content-type"].startswith("text/html")  # a page, not JSON
    assert site.adapter("write@4")["tags"] == {}
    site.api.client.cookies.clear()
    reader_csrf = site.sign_in("reader")
    page = site.api.client.get(f"/adapters/{write4}").text
    assert "/tags" not in re.sub(r'href="[^"]*"', "", page)  # no form for a reader
    refused = site.post(f"/adapters/{write4}/tags", {"csrf": reader_csrf, "set": "a=b"})
    assert refused.status_code == 403
    assert site.adapter("write@4")["tags"] == {}


def test_audit_filters(read_site: Site) -> None:
    every = read_site.get("/audit").text
    approvals = read_site.get("/audit?action=adapter.approve").text
    actions = set(re.findall(r"<td><code>([a-z_.]+)</code></td>", approvals))
    assert actions == {"adapter.approve"}
    family = set(
        re.findall(
            r"<td><code>([a-z_.]+)</code></td>", read_site.get("/audit?action=channel.").text
        )
    )
    assert family
    assert all(a.startswith("channel.") for a in family)
    bob = read_site.get("/audit?actor=bob").text
    assert set(re.findall(r'title="only ([^"]+)\'s events"', bob)) == {"bob"}
    write2 = read_site.ids["write@2"]
    subject = text_of(read_site.get(f"/audit?subject=adapter:{write2}").text)
    assert "adapter.register" in subject
    assert "adapter.approve" in subject
    assert f"adapter:{read_site.ids['write@3']}" not in subject
    assert "No event matches." in read_site.get("/audit?actor=nobody").text
    assert len(re.findall(r"<tr>", approvals)) < len(re.findall(r"<tr>", every))
