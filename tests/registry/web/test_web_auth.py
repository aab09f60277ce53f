"""Signing in, roles and CSRF on the pages, through the app (httpx); nothing changes on a
refusal, and no page ever shows a token's secret."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from webworld import Site, hidden

PAGES = ("/", "/capabilities", "/adapters", "/channels", "/channels/prod", "/gates", "/nodes")


def cookie_header(response: Any, name: str) -> str:
    headers = response.headers.get_list("set-cookie")
    return next(h for h in headers if h.startswith(f"{name}="))


@pytest.mark.parametrize("path", [*PAGES, "/audit", "/channels/prod/diff?from=1&to=2"])
def test_a_page_without_a_token_sends_to_sign_in(read_site: Site, path: str) -> None:
    answer = read_site.get(path, who=None)
    assert answer.status_code == 303
    location = answer.headers["location"]
    assert location.startswith("/sign-in?next=")
    assert read_site.api.client.get(location).status_code == 200


def test_a_bad_or_revoked_token_is_sent_to_sign_in_and_its_cookie_dropped(
    read_site: Site,
) -> None:
    client = read_site.api.client
    client.cookies.set("weact_token", "weact_not-a-token")
    try:
        answer = client.get("/adapters", follow_redirects=False)
    finally:
        client.cookies.clear()
    assert answer.status_code == 303
    assert answer.headers["location"] == "/sign-in?next=%2Fadapters"
    assert "Max-Age=0" in cookie_header(answer, "weact_token")
    headers = {"Authorization": "Bearer weact_wrong"}
    assert client.get("/", headers=headers, follow_redirects=False).status_code == 303


def test_sign_in_sets_a_strict_http_only_cookie_and_sign_out_clears_it(shared_site: Site) -> None:
    client = shared_site.api.client
    form = client.get("/sign-in?next=/gates")
    nonce_cookie = cookie_header(form, "weact_signin")
    assert "HttpOnly" in nonce_cookie
    assert "SameSite=strict" in nonce_cookie
    body = {"token": shared_site.api.tokens["reader"], "csrf": hidden(form.text, "csrf")}
    answer = shared_site.post("/sign-in", {**body, "next": hidden(form.text, "next")})
    assert (answer.status_code, answer.headers["location"]) == (303, "/gates")
    token_cookie = cookie_header(answer, "weact_token")
    assert "HttpOnly" in token_cookie
    assert "SameSite=strict" in token_cookie
    assert "Path=/" in token_cookie
    assert "Secure" not in token_cookie  # plain HTTP here; set over HTTPS
    page = client.get("/")
    assert page.status_code == 200
    assert "rita" in page.text
    out = shared_site.post("/sign-out", {"csrf": hidden(page.text, "csrf")})
    assert (out.status_code, out.headers["location"]) == (303, "/sign-in")
    assert client.get("/", follow_redirects=False).status_code == 303


def test_sign_in_refuses_a_bad_token_and_a_forged_form(shared_site: Site) -> None:
    client = shared_site.api.client
    form = client.get("/sign-in")
    nonce = hidden(form.text, "csrf")
    wrong = shared_site.post("/sign-in", {"token": "weact_guess", "csrf": nonce})
    assert wrong.status_code == 401
    assert "invalid or revoked token" in wrong.text
    assert "weact_token" not in client.cookies
    forged = shared_site.post(
        "/sign-in", {"token": shared_site.api.tokens["admin"], "csrf": "x" * 32}
    )
    assert forged.status_code == 403
    assert "weact_token" not in client.cookies
    client.cookies.clear()
    no_cookie = shared_site.post(
        "/sign-in", {"token": shared_site.api.tokens["admin"], "csrf": nonce}
    )
    assert no_cookie.status_code == 403


@pytest.mark.parametrize("target", ["//evil.example/x", "https://evil.example", "/\\evil", "gates"])
def test_sign_in_never_redirects_off_site(shared_site: Site, target: str) -> None:
    form = shared_site.api.client.get("/sign-in")
    body = {
        "token": shared_site.api.tokens["reader"],
        "csrf": hidden(form.text, "csrf"),
        "next": target,
    }
    assert shared_site.post("/sign-in", body).headers["location"] == "/"


def test_no_page_shows_a_token_secret(shared_site: Site) -> None:
    secrets = list(shared_site.api.tokens.values())
    shared_site.sign_in("approver")
    candidate = shared_site.ids["write@4"]
    paths = [*PAGES, "/audit", "/sign-in", f"/adapters/{candidate}", "/adapters/999"]
    for path in paths:
        page = shared_site.api.client.get(path)
        assert not any(secret in page.text for secret in secrets), path
        assert not re.search(r"weact_[A-Za-z0-9_-]{20,}", page.text), path
    refused = shared_site.post(f"/adapters/{candidate}/approve", {"csrf": "wrong"})
    assert not any(secret in refused.text for secret in secrets)


def test_a_reader_cannot_approve(shared_site: Site) -> None:
    candidate = shared_site.ids["write@4"]
    csrf = shared_site.sign_in("reader")
    page = shared_site.api.client.get(f"/adapters/{candidate}").text
    assert "/approve" not in page  # no form offered
    answer = shared_site.post(f"/adapters/{candidate}/approve", {"csrf": csrf})
    assert answer.status_code == 403
    assert "role 'reader' may not approve" in html.unescape(answer.text)
    assert shared_site.adapter("write@4")["state"] == "candidate"


def test_an_approver_approves_through_the_form(site: Site) -> None:
    candidate = site.ids["write@4"]
    csrf = site.sign_in("approver")
    page = site.api.client.get(f"/adapters/{candidate}").text
    assert hidden(page, "csrf") == csrf
    answer = site.post(f"/adapters/{candidate}/approve", {"csrf": csrf, "reason": "fine"})
    assert (answer.status_code, answer.headers["location"]) == (
        303,
        f"/adapters/{candidate}?done=approve",
    )
    assert "Approved." in site.api.client.get(answer.headers["location"]).text
    assert site.adapter("write@4")["state"] == "approved"
    event = site.api.ok("GET", "/events?limit=1000", "reader")[-1]
    assert (event["actor"], event["action"]) == ("bob", "adapter.approve")
    assert event["payload"]["reason"] == "fine"


@pytest.mark.parametrize(
    ("csrf", "origin"),
    [(None, None), ("0" * 64, None), ("<page>", "http://evil.example")],
    ids=["missing", "wrong", "foreign-origin"],
)
def test_csrf_refusals_change_nothing(
    shared_site: Site, csrf: str | None, origin: str | None
) -> None:
    candidate = shared_site.ids["write@4"]
    real = shared_site.sign_in("approver")
    before = shared_site.api.counts()
    data = {} if csrf is None else {"csrf": real if csrf == "<page>" else csrf}
    headers = {"Origin": origin} if origin else {}
    answer = shared_site.post(f"/adapters/{candidate}/approve", data, headers=headers)
    assert answer.status_code == 403
    assert 'data-code="forbidden"' in answer.text
    assert shared_site.api.counts() == before
    assert shared_site.adapter("write@4")["state"] == "candidate"


def test_a_bearer_header_needs_no_csrf(site: Site) -> None:
    """A browser never adds the Authorization header by itself: scripts and curl may post."""
    candidate = site.ids["write@4"]
    answer = site.post(f"/adapters/{candidate}/reject", {}, headers=site.api.auth("approver"))
    assert answer.status_code == 303
    assert site.adapter("write@4")["state"] == "rejected"


def test_a_post_without_a_token_is_401_and_not_a_form_is_400(shared_site: Site) -> None:
    candidate = shared_site.ids["write@4"]
    assert shared_site.post(f"/adapters/{candidate}/approve", {}).status_code == 401
    assert shared_site.post(f"/adapters/{candidate}/approve", {"reason": "x"}).status_code == 401
    headers = shared_site.api.auth("approver")
    not_form = shared_site.api.client.post(
        f"/adapters/{candidate}/approve", json={"reason": "x"}, headers=headers
    )
    assert not_form.status_code == 400
    big = {"reason": "x" * 70_000}
    assert (
        shared_site.post(f"/adapters/{candidate}/approve", big, headers=headers).status_code == 413
    )
    assert shared_site.adapter("write@4")["state"] == "candidate"
