"""The web pages in a real browser: Debian's Chromium driven by Playwright, against the
registry over real HTTP (served from a thread of the test process), populated through
`registry.client` (see ``served``).

Screenshots go to ``$WEACT_SCREENSHOTS`` (default: a folder under pytest's temp dir); the
folder and every file are listed in the test summary ("web UI screenshots").
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from served import CARD, TAGS, Served, populate_served
from support.browser import chromium_path
from support.serving import registry_in_process
from support.shots import Shots

pytestmark = pytest.mark.timeout(300)

VIEWPORT = {"width": 1280, "height": 860}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    chromium_path()  # skip before starting anything when there is no browser
    workdir = tmp_path_factory.mktemp("web-registry")
    with registry_in_process(workdir) as server:
        yield populate_served(server, workdir)


def sign_in(page: Any, served: Served, who: str) -> None:
    page.goto(f"{served.url}/sign-in")
    page.fill("#token", served.tokens[who])
    page.click("form[action='/sign-in'] button[type=submit]")
    page.wait_for_load_state()
    assert "/sign-in" not in page.url, page.content()


def test_reader_sees_the_registry(browser: Any, served: Served, shots: Shots) -> None:
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.goto(f"{served.url}/channels/prod")
    assert re.search(r"/sign-in\?next=%2Fchannels%2Fprod$", page.url), page.url
    shots.take(page, "01-sign-in")
    page.fill("#token", served.tokens["reader"])
    page.click("form[action='/sign-in'] button[type=submit]")
    assert page.url == f"{served.url}/channels/prod"
    cookie = next(c for c in context.cookies() if c["name"] == "weact_token")
    assert cookie["httpOnly"]
    assert cookie["sameSite"] == "Strict"
    assert page.evaluate("document.cookie") == ""  # the script sees no token
    assert "write: write@1 → write@2" in page.inner_text("table.history")
    shots.take(page, "05-channel")

    page.goto(f"{served.url}/")
    assert page.inner_text("h1") == "Overview"
    assert "write@4" in page.inner_text("main")  # the candidate waits for a decision
    assert "chain intact" in page.inner_text(".stats")
    shots.take(page, "02-overview")

    page.goto(f"{served.url}/capabilities")
    assert page.locator("table >> text=plan").count() >= 1
    assert page.locator("button.copy").first.is_visible()  # the script added copy buttons
    shots.take(page, "03-capabilities")
    page.goto(f"{served.url}/adapters")
    assert page.locator("table.adapters tbody tr").count() == 6
    shots.take(page, "04-adapters")

    for path, name, needle in (
        ("/gates", "08-gates", "refused"),
        ("/nodes", "09-nodes", "1 behind"),
        ("/audit", "10-audit", "Chain intact"),
    ):
        page.goto(f"{served.url}{path}")
        assert needle in page.inner_text("main"), path
        shots.take(page, name)
    context.close()


def path_ends(d: str) -> tuple[tuple[float, float], tuple[float, float]]:
    numbers = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", d)]
    return (numbers[0], numbers[1]), (numbers[-2], numbers[-1])


def box_of(page: Any, adapter_id: int) -> tuple[float, float, float, float]:
    rect = page.locator(f"svg.lineage a.node[data-adapter='{adapter_id}'] rect")
    x, y, w, h = (float(rect.get_attribute(a)) for a in ("x", "y", "width", "height"))
    return x, y, w, h


def test_lineage_graph_points_from_parent_to_child(
    browser: Any, served: Served, shots: Shots
) -> None:
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    sign_in(page, served, "reader")
    ids = served.ids
    page.goto(f"{served.url}/adapters/{ids['write@1']}")  # write@1 and its descendants
    adapter = served.client("reader").get_adapter(ids["write@1"])
    assert adapter["manifest_root"] in page.inner_text("main")  # the full digest, copyable
    for parent, child in (("write@1", "write@2"), ("write@2", "write@3"), ("write@1", "write@4")):
        edge = page.locator(
            f"svg.lineage path.edge[data-parent='{ids[parent]}'][data-child='{ids[child]}']"
        )
        assert edge.count() == 1, (parent, child)
        assert edge.get_attribute("marker-end") == "url(#arrow)"  # the arrowhead: at the child
        start, end = path_ends(edge.get_attribute("d"))
        left, right = box_of(page, ids[parent]), box_of(page, ids[child])
        assert start == pytest.approx((left[0] + left[2], left[1] + left[3] / 2), abs=3)
        assert end == pytest.approx((right[0], right[1] + right[3] / 2), abs=3)
    assert page.locator("svg.lineage path.edge").count() == 3
    shots.take(page, "06-adapter-lineage")
    context.close()


def test_version_page_shows_its_model_card_and_tags(
    browser: Any, served: Served, shots: Shots
) -> None:
    """write@2 was pushed with a README.md and tags: its page shows both, server-rendered
    (JavaScript off), the card's markdown rendered and its HTML as text."""
    context = browser.new_context(viewport=VIEWPORT, java_script_enabled=False)
    page = context.new_page()
    sign_in(page, served, "reader")
    page.goto(f"{served.url}/adapters/{served.ids['write@2']}")
    card = page.locator("#card .markdown")  # rendered from markdown on the server
    assert card.locator("h1").inner_text() == "write++"
    assert "Writes the report with <b>citations</b> kept" in card.inner_text()
    assert card.locator("b").count() == 0  # <b> in the card is text, not markup
    source = page.locator("#card pre.card-source")  # in a folded <details>
    assert source.text_content().strip() == CARD.strip()
    tags = page.inner_text("#card p.tags")
    for key, value in TAGS.items():
        assert f"{key}={value}" in tags
    assert "README.md" in page.inner_text("table.files")
    shots.take(page, "15-model-card")
    page.goto(f"{served.url}/adapters/{served.ids['write@1']}")  # pushed without a card
    assert "No model card recorded" in page.inner_text("#card")
    assert page.locator("#card p.tags").count() == 0
    context.close()


def test_revision_diff_shows_the_changed_capability(
    browser: Any, served: Served, shots: Shots
) -> None:
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    sign_in(page, served, "reader")
    page.goto(f"{served.url}/channels/prod")
    page.select_option("form.filters select[name=from]", "1")
    page.select_option("form.filters select[name=to]", "2")
    page.click("form.filters button[type=submit]")
    assert page.url.endswith("/channels/prod/diff?from=1&to=2")
    row = page.locator("table.diff tr[data-capability=write]")
    assert row.get_attribute("class") == "change-changed"
    assert re.search(r"write@1.*\n?.*write@2", row.inner_text())
    plan = page.locator("table.diff tr[data-capability=plan]")
    assert plan.get_attribute("class") == "change-unchanged"
    shots.take(page, "07-diff")
    context.close()


def test_approver_approves_and_reader_cannot(browser: Any, served: Served, shots: Shots) -> None:
    candidate = served.ids["write@4"]
    url = f"{served.url}/adapters/{candidate}"
    reader = browser.new_context(viewport=VIEWPORT)
    page = reader.new_page()
    sign_in(page, served, "reader")
    page.goto(url)
    assert page.locator("form[action$='/approve']").count() == 0
    csrf = page.locator("form[action='/sign-out'] input[name=csrf]").get_attribute("value")
    refused = page.request.post(f"{url}/approve", form={"csrf": csrf}, max_redirects=0)
    assert refused.status == 403
    reader.close()
    assert served.client("reader").get_adapter(candidate)["state"] == "candidate"

    approver = browser.new_context(viewport=VIEWPORT)
    page = approver.new_page()
    sign_in(page, served, "approver")
    page.goto(url)
    page.fill("form[action$='/approve'] input[name=reason]", "reviewed in the browser")
    page.click("form[action$='/approve'] button[type=submit]")
    assert page.url == f"{url}?done=approve"
    assert page.inner_text(".notice") == "Approved."
    assert page.inner_text("h1 .badge") == "approved"
    shots.take(page, "11-approved")
    approver.close()
    assert served.client("reader").get_adapter(candidate)["state"] == "approved"


def test_a_promotion_the_gate_refuses_shows_the_report(
    browser: Any, served: Served, shots: Shots
) -> None:
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    sign_in(page, served, "approver")
    page.goto(f"{served.url}/channels/prod")
    before = served.client("reader").get_channel("prod")["revision"]
    page.select_option("select[name='adapter.write']", str(served.ids["write@3"]))
    page.click("form.promote button[type=submit]")
    assert page.inner_text("h1") == "Gate failed"
    assert "fail" in page.inner_text("table.checks")
    shots.take(page, "14-gate-refused")
    context.close()
    assert served.client("reader").get_channel("prod")["revision"] == before


def test_approver_rolls_back_a_channel(browser: Any, served: Served, shots: Shots) -> None:
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    sign_in(page, served, "approver")
    page.goto(f"{served.url}/channels/prod")
    head = served.client("reader").get_channel("prod")["revision"]
    page.once("dialog", lambda dialog: dialog.accept())  # the script asks before rolling back
    page.click("#revision-1 form[action$='/rollback'] button")
    assert page.url == f"{served.url}/channels/prod?done=rollback"
    assert f"revision {head + 1}" in page.inner_text("h1")
    assert "write: write@2 → write@1" in page.inner_text("table.history")
    shots.take(page, "13-rolled-back")
    context.close()
    current = served.client("reader").get_channel("prod")
    assert current["revision"] == head + 1
    assert current["library"]["write"]["name"] == "write@1"


def test_reading_works_without_javascript(browser: Any, served: Served, shots: Shots) -> None:
    context = browser.new_context(viewport=VIEWPORT, java_script_enabled=False)
    page = context.new_page()
    sign_in(page, served, "reader")  # a plain form post
    page.goto(f"{served.url}/adapters/{served.ids['write@3']}")
    assert page.locator("svg.lineage path.edge").count() == 2  # write@1 -> write@2 -> write@3
    assert not page.locator("button.copy").first.is_visible()  # script-only buttons stay hidden
    page.goto(f"{served.url}/channels/prod")
    page.click("form.filters button[type=submit]")  # a GET form: the diff of the head
    assert "/channels/prod/diff?" in page.url
    assert page.locator("table.diff tr[data-capability=write]").count() == 1
    shots.take(page, "12-no-javascript-diff")
    context.close()
