"""The web pages at a thousand versions in a real browser (Debian's Chromium under Playwright)
against the registry over real HTTP (served from a thread of the test process): search,
sort, page numbers, the compare view, the score chart, a model card whose `<script>` stays
inert, a phone-sized screen without sideways scrolling, and dark mode.

The registry is the one ``served`` populates through the API, plus capability ``bulk`` with
1,001 versions (one pushed, 1,000 recorded through the service layer: ``bulk``).
Screenshots go to ``$WEACT_SCREENSHOTS`` (listed in the test summary).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from bulk import seed_versions
from served import Served, populate_served
from support.browser import chromium_path
from support.serving import registry_in_process
from support.shots import Shots

from registry.db.session import Database
from storage import open_store

pytestmark = pytest.mark.timeout(300)

DESKTOP = {"width": 1280, "height": 860}
PHONE = {"width": 390, "height": 844}
TOTAL = 1001
EVIL_CARD = (
    "# bulk, with a trap\n\n"
    "<script>window.pwned = 1; document.title = 'pwned'</script>\n\n"
    "[click me](javascript:window.pwned=2) and [the docs](https://example.org/docs)\n\n"
    '<img src=x onerror="window.pwned=3">\n'
)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    chromium_path()  # skip before starting anything when there is no browser
    workdir = tmp_path_factory.mktemp("web-registry-scale")
    with registry_in_process(workdir) as server:
        served = populate_served(server, workdir)
        with served.client("admin") as admin:
            admin.create_capability(name="bulk", description="Many versions", order=3)
        template = served.push("bulk", 31)
        db = Database(server.database_url)
        try:
            ids = seed_versions(db, open_store(server.store_url), template, count=TOTAL - 1)
        finally:
            db.dispose()
        served.ids["bulk@1"] = template
        served.ids.update({f"bulk@{n + 2}": adapter_id for n, adapter_id in enumerate(ids)})
        served.ids["bulk-evil"] = served.push("bulk", 32, card=EVIL_CARD)
        yield served


def sign_in(browser: Any, served: Served, **options: Any) -> tuple[Any, Any]:
    context = browser.new_context(**{"viewport": DESKTOP, **options})
    page = context.new_page()
    page.goto(f"{served.url}/sign-in")
    page.fill("#token", served.tokens["reader"])
    page.click("form[action='/sign-in'] button[type=submit]")
    page.wait_for_load_state()
    assert "/sign-in" not in page.url, page.content()
    return context, page


def shown(page: Any) -> list[str]:
    return [
        link.inner_text() for link in page.locator("table.adapters tbody tr td:first-child a").all()
    ]


def test_search_sort_and_page_numbers(browser: Any, served: Served, shots: Shots) -> None:
    context, page = sign_in(browser, served)
    page.goto(f"{served.url}/adapters")
    assert page.inner_text("#count").startswith(f"{TOTAL + 7} versions · page 1 of 21")
    page.fill("input[name=q]", "bulk card 999")
    page.click("form.filters button[type=submit]")
    assert shown(page) == ["bulk@1001"]
    shots.take(page, "20-adapters-search")

    page.fill("input[name=q]", "")
    page.fill("input[name=tag]", "batch=b1")
    page.select_option("select[name=capability]", "bulk")
    page.select_option("select[name=sort]", "newest")
    page.click("form.filters button[type=submit]")
    assert page.inner_text("#count").startswith("250 versions · page 1 of 5")
    versions = [int(name.split("@")[1]) for name in shown(page)]
    assert versions == sorted(versions, reverse=True)
    assert all((v - 2) % 4 == 1 for v in versions)  # batch b1: n % 4 == 1, version n + 2

    page.click("nav.pager a[data-page='5']")
    assert "page=5" in page.url
    assert "tag=batch%3Db1" in page.url  # the search travels with the page number
    assert page.inner_text("#count").startswith("250 versions · page 5 of 5")
    assert page.locator("nav.pager span.current").inner_text() == "5"
    shots.take(page, "21-adapters-sorted-page-5")
    context.close()


def test_compare_view(browser: Any, served: Served, shots: Shots) -> None:
    context, page = sign_in(browser, served)
    page.goto(f"{served.url}/adapters/{served.ids['write@2']}")
    page.select_option("#compare select[name=left]", str(served.ids["write@1"]))
    page.click("#compare button[type=submit]")
    assert "/adapters/compare?" in page.url
    assert page.inner_text("h1") == "write@1 vs write@2"  # the other one is the baseline
    assert page.locator("table.compare tr.differs[data-field='label']").count() == 1
    assert int(page.inner_text("#tensors-changed")) > 0
    row = page.locator("table.scores tr[data-benchmark='write-quality@1']").inner_text()
    assert row.split("\t")[1:] == ["0.8", "0.86", "+0.06"]
    shots.take(page, "22-compare")
    context.close()


def test_score_chart(browser: Any, served: Served, shots: Shots) -> None:
    context, page = sign_in(browser, served)
    page.goto(f"{served.url}/adapters/{served.ids['bulk@5']}")
    chart = page.locator("figure.chart[data-benchmark='bulk-quality@1'] svg")
    assert chart.is_visible()
    points = chart.locator("circle.point")
    assert points.count() == 27
    box = chart.bounding_box()

    def inside(dot: dict[str, float]) -> bool:
        across = box["x"] <= dot["x"] <= dot["x"] + dot["width"] <= box["x"] + box["width"] + 1
        down = box["y"] <= dot["y"] <= dot["y"] + dot["height"] <= box["y"] + box["height"] + 1
        return across and down

    for index in range(points.count()):
        assert inside(points.nth(index).bounding_box()), index
    xs = [points.nth(i).bounding_box()["x"] for i in range(points.count())]
    assert xs == sorted(xs)  # versions left to right
    assert chart.locator("circle.point.current").get_attribute("data-version") == "5"
    page.locator("#scores").scroll_into_view_if_needed()
    shots.take(page, "23-chart")
    context.close()


def test_a_long_line_scrolls_to_its_version(browser: Any, served: Served, shots: Shots) -> None:
    context, page = sign_in(browser, served)
    page.goto(f"{served.url}/adapters/{served.ids['bulk@20']}")  # 19th of a line of 27
    graph = page.locator("#lineage .graph")
    assert graph.locator("a.node").count() == 27
    assert page.evaluate("document.documentElement.scrollWidth") <= DESKTOP["width"]
    assert graph.evaluate("g => g.scrollWidth > g.clientWidth")  # it scrolls, the page not
    frame = graph.bounding_box()
    current = graph.locator("a.node.current rect").bounding_box()
    right = frame["x"] + frame["width"]
    assert frame["x"] <= current["x"] <= current["x"] + current["width"] <= right
    assert page.locator("#lineage details.edges").get_attribute("open") is None  # list folded
    assert not page.locator("#lineage ul.edges").is_visible()
    page.click("#lineage details.edges summary")
    assert page.locator("#lineage li.edge-text").count() == 26
    shots.take(page, "25-lineage-27-versions")
    context.close()


def test_a_script_in_a_model_card_stays_inert(browser: Any, served: Served, shots: Shots) -> None:
    context, page = sign_in(browser, served)
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(f"{served.url}/adapters/{served.ids['bulk-evil']}")
    card = page.locator("#card .markdown")
    assert card.locator("h1").inner_text() == "bulk, with a trap"
    assert "<script>window.pwned = 1" in card.inner_text()  # shown as text
    assert card.locator("script, img").count() == 0
    assert card.locator("a").count() == 1  # the https link; the javascript: one is text
    assert card.locator("a").get_attribute("href") == "https://example.org/docs"
    assert page.evaluate("window.pwned") is None
    assert "pwned" not in page.title()
    assert dialogs == []
    shots.take(page, "24-model-card-inert-script")
    context.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_a_phone_sized_screen_never_scrolls_sideways(
    browser: Any, served: Served, shots: Shots, scheme: str
) -> None:
    context, page = sign_in(browser, served, viewport=PHONE, color_scheme=scheme)
    ids = served.ids
    for path, name in (
        ("/channels/prod", "channel"),
        ("/adapters", "adapters"),
        (f"/adapters/{ids['write@2']}", "adapter"),
        (f"/adapters/{ids['bulk@28']}", "adapter-27-line"),
        ("/", "overview"),
        (f"/adapters/compare?left={ids['write@1']}&right={ids['write@2']}", "compare"),
    ):
        page.goto(f"{served.url}{path}")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], (path, width)
        shots.take(page, f"30-{scheme}-390px-{name}")
    background = page.evaluate("getComputedStyle(document.querySelector('main')).backgroundColor")
    assert (background == "rgb(255, 255, 255)") == (scheme == "light"), background
    context.close()
