"""The pages at a thousand versions, through real HTTP (the app over SQLite): search, sort,
page numbers, the paginated "Awaiting a decision", a 27-version lineage, the score chart,
the compare view and the file downloads; each list page in a bounded number of queries.

The registry is the one ``webworld`` populates, plus capability ``bulk`` with 1,001
versions (one pushed through the API, 1,000 recorded through the service layer: ``bulk``).
"""

from __future__ import annotations

import html
import re
import time

import pytest
from bulk import seed_versions
from test_pages import text_of
from webworld import Site, counted

from registry.services import adapter_list
from registry.services.blobs import blob_size

COUNT = 1000
TOTAL = COUNT + 1  # and the template pushed through the API


@pytest.fixture(scope="module")
def big(read_site: Site) -> Site:
    api = read_site.api
    api.capability("bulk", 3)
    template = api.adapter("bulk", read_site.backbone, seed=31)
    time.perf_counter()
    ids = seed_versions(api.db, api.store, template["id"], count=COUNT)
    read_site.ids["bulk@1"] = template["id"]
    read_site.ids.update({f"bulk@{n + 2}": adapter_id for n, adapter_id in enumerate(ids)})
    return read_site


def rows(page: str) -> list[int]:
    return [int(r) for r in re.findall(r'<tr data-adapter="(\d+)">', page)]


def test_adapters_pages_with_numbers_and_a_count(big: Site) -> None:
    with counted(big) as statements:
        started = time.perf_counter()
        first = big.get("/adapters?capability=bulk")
        took = time.perf_counter() - started
    assert first.status_code == 200
    assert f"{TOTAL} versions · page 1 of 21" in text_of(first.text)
    assert rows(first.text) == sorted(rows(first.text))[:50]
    assert len(rows(first.text)) == 50
    assert 'href="/adapters?capability=bulk&amp;page=21" data-page="21"' in first.text
    assert 'data-page="4"' not in first.text  # a window around the current page, and a gap
    assert len(statements) < 15, statements  # no query per row
    assert took < 3, took
    last = big.get("/adapters?capability=bulk&page=21")
    assert rows(last.text) == [big.ids[f"bulk@{TOTAL}"]]
    middle = text_of(big.get("/adapters?capability=bulk&page=10").text)
    assert "← previous 1 … 8 9 10 11 12 … 21 next →" in middle


def test_search_by_card_text_and_tags(big: Site) -> None:
    one = big.get("/adapters", params={"q": "bulk card 999"})
    assert rows(one.text) == [big.ids["bulk@1001"]]
    assert "1 version" in text_of(one.text)
    tagged = big.get("/adapters", params={"tag": "batch=b1", "capability": "bulk"})
    assert f"{COUNT // 4} versions" in text_of(tagged.text)
    both = big.get("/adapters", params={"tag": "batch=b1", "q": "BULK CARD 99"})
    # cards 99, 990..999 hold "bulk card 99"; of those, n % 4 == 1: 993, 997
    assert rows(both.text) == [big.ids["bulk@995"], big.ids["bulk@999"]]
    # the page links keep the search
    many = big.get("/adapters", params={"tag": "batch=b2"})
    assert "tag=batch%3Db2" in many.text
    assert "page=2" in many.text
    assert big.get("/adapters", params={"tag": "nonsense"}).status_code == 422


@pytest.mark.parametrize(
    ("sort", "first"),
    [("oldest", "bulk@1"), ("newest", "bulk@1001"), ("label", "bulk@2"), ("name", "bulk@1")],
)
def test_sorting(big: Site, sort: str, first: str) -> None:
    page = big.get("/adapters", params={"capability": "bulk", "sort": sort})
    assert rows(page.text)[0] == big.ids[first]
    assert f'<option value="{sort}" selected>' in page.text


def test_an_unknown_sort_is_refused(big: Site) -> None:
    page = big.get("/adapters?sort=sideways")
    assert page.status_code == 422
    assert "unknown sort" in page.text


def test_awaiting_a_decision_is_paginated(big: Site) -> None:
    with counted(big) as statements:
        page = big.get("/")
    waiting = 1 + TOTAL - (COUNT // 10)  # write@4, the template, 900 unapproved bulk versions
    text = text_of(page.text)
    assert f"Awaiting a decision {waiting} candidates · page 1 of {-(-waiting // 20)}" in text
    section = page.text.split('id="waiting"')[1].split("</section>")[0]
    assert len(rows(section)) == 20
    assert len(statements) < 25, "\n".join(s[:110] for s in statements)
    second = big.get("/?waiting=2")
    assert len(rows(second.text.split('id="waiting"')[1])) == 20
    assert set(rows(second.text)).isdisjoint(rows(section))


def test_a_long_line_is_a_graph_and_a_folded_list(big: Site) -> None:
    with counted(big) as statements:
        page = big.get(f"/adapters/{big.ids['bulk@28']}")  # the last of the first line of 27
    assert len(statements) < 20, "\n".join(s[:110] for s in statements)  # not per ancestor
    with counted(big) as statements:
        big.get(f"/adapters/{big.ids['bulk@2']}")  # the first: 26 descendants
    assert len(statements) < 20, statements
    assert page.status_code == 200
    assert len(re.findall(r'<a href="/adapters/\d+" class="node', page.text)) == 27
    assert '<details class="edges">' in page.text
    assert "27 versions in this line" in text_of(page.text)


def test_the_chart_plots_each_version_score(big: Site) -> None:
    page = big.get(f"/adapters/{big.ids['bulk@5']}")
    chart = page.text.split('<figure class="chart" data-benchmark="bulk-quality@1">')[1]
    chart = chart.split("</figure>")[0]
    versions = [int(v) for v in re.findall(r'data-version="(\d+)"', chart)]
    assert versions == list(range(2, 29))  # the first line's 27 versions, by version
    assert chart.count('class="point current"') == 1
    scores = [float(s) for s in re.findall(r'data-score="([0-9.]+)"', chart)]
    assert scores[0] == pytest.approx(0.5)
    ys = [float(y) for y in re.findall(r'cy="([0-9.]+)"', chart)]
    assert ys[scores.index(max(scores))] == min(ys)  # higher scores are drawn higher


def test_compare_two_versions(read_site: Site) -> None:
    ids = read_site.ids
    page = read_site.get(f"/adapters/compare?left={ids['write@1']}&right={ids['write@2']}")
    assert page.status_code == 200
    text = text_of(page.text)
    assert "write@1 vs write@2" in text
    assert re.search(r'<tr class="differs" data-field="label">', page.text)
    assert re.search(r'<tr class="same" data-field="rank">', page.text)
    changed = int(re.search(r'id="tensors-changed">(\d+)<', page.text).group(1))
    assert changed > 0  # other seeds, other weights
    assert "write-quality@1 0.8 0.86 +0.06" in text
    missing = read_site.get(f"/adapters/compare?left={ids['write@1']}&right=999999")
    assert missing.status_code == 404


def test_adapter_page_offers_sizes_downloads_and_the_pull_command(read_site: Site) -> None:
    write2 = read_site.adapter("write@2")
    page = read_site.get(f"/adapters/{write2['id']}")
    text = text_of(page.text)
    assert f"weact adapter pull {write2['id']} --to write-2" in text
    store = read_site.api.store
    for name, digest in write2["files"].items():
        size = blob_size(store=store, digest=digest)
        assert f'title="{size} bytes"' in page.text
        link = f"/adapters/{write2['id']}/files/{name}"
        assert f'href="{link}" download' in page.text
        answer = read_site.get(link)
        assert answer.status_code == 200
        assert answer.content == store.get(digest)
        assert f'filename="write-2-{name}"' in answer.headers["content-disposition"]
    assert read_site.get(f"/adapters/{write2['id']}/files/secrets.txt").status_code == 404
    assert read_site.get(f"/adapters/{write2['id']}/files/README.md", who=None).status_code == 303


def _link(page: str, rel: str) -> str | None:
    found = re.search(rf'<a href="([^"]+)" rel="{rel}">', page)
    return html.unescape(found.group(1)) if found else None


@pytest.mark.parametrize("sort", ["oldest", "newest"])
def test_deep_pages_go_by_key_past_a_capped_count(
    big: Site, sort: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(adapter_list, "COUNT_CAP", 120)
    first = big.get("/adapters", params={"capability": "bulk", "sort": sort})
    assert "120+ versions · page 1 of 3+" in text_of(first.text)
    assert 'data-page="3"' in first.text
    assert 'data-page="4"' not in first.text
    pages, url = [rows(first.text)], _link(first.text, "next")
    while url is not None:  # next → to the end, by key past the counted pages
        assert "after=" in url
        page = big.get(url)
        pages.append(rows(page.text))
        url = _link(page.text, "next")
    expected = sorted(big.ids[f"bulk@{n}"] for n in range(1, TOTAL + 1))
    expected = expected[::-1] if sort == "newest" else expected
    assert [i for p in pages for i in p] == expected
    assert len(pages) == -(-TOTAL // 50)
    assert f"page {len(pages)}" in text_of(page.text)
    assert "of 3+" not in text_of(page.text)
    back = [rows(page.text)]
    url = _link(page.text, "prev")
    while url is not None:  # ← previous, back to the first page
        page = big.get(url)
        back.append(rows(page.text))
        url = _link(page.text, "prev")
    assert back[::-1] == pages


def test_pages_by_offset_stop_at_the_offset_cap(big: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(adapter_list, "MAX_OFFSET", 100)  # as deep as the count goes
    monkeypatch.setattr(adapter_list, "COUNT_CAP", 100)
    params = {"capability": "bulk", "sort": "name"}
    second = big.get("/adapters", params={**params, "page": 2})
    assert _link(second.text, "next") is not None  # page 3 starts at offset 100
    third = big.get("/adapters", params={**params, "page": 3})
    assert len(rows(third.text)) == 50
    assert _link(third.text, "next") is None  # page 4 would skip 150
    fourth = big.get("/adapters", params={**params, "page": 4})
    assert fourth.status_code == 422
    keyset = big.get("/adapters", params={**params, "sort": "oldest", "page": 3})
    assert _link(keyset.text, "next") is not None  # by key: no cap
