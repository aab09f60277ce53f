"""Every page through the app (httpx), read with a reader's token: status and the real data.

The registry is the one ``webworld`` populates through the API.
"""

from __future__ import annotations

import html
import re

import pytest
from harness import Harness
from webworld import Site

SECURITY = {
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
}


def text_of(page: str) -> str:
    """The page's text, tags dropped and entities decoded (for plain assertions)."""
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)))


def test_overview(read_site: Site) -> None:
    page = read_site.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    for name, value in SECURITY.items():
        assert page.headers[name] == value
    assert "script-src 'self'" in page.headers["content-security-policy"]
    text = text_of(page.text)
    assert "1 candidate" in text
    assert "5 approved" in text
    assert "plan plan@1 search search@1 write write@2" in text  # prod's head, hard order
    assert "write@4 write-alt" in text  # awaiting a decision
    assert "node-1 · prod r1 1 behind audit ok" in text
    assert "chain intact" in text
    assert "refused prod on r2" in text
    assert "development unsigned accepted · no root" in text  # no weact serve: no root made


def test_capabilities_and_backbones(read_site: Site) -> None:
    text = text_of(read_site.get("/capabilities").text)
    assert "0 plan the plan phase" in text
    assert "3 approved 1 candidate" in text  # write's versions by state
    assert read_site.backbone in text  # the full root


@pytest.mark.parametrize(
    ("query", "shown"),
    [
        ("", {"plan@1", "search@1", "write@1", "write@2", "write@3", "write@4"}),
        ("?state=candidate", {"write@4"}),
        ("?capability=write&state=approved", {"write@1", "write@2", "write@3"}),
        ("?capability=plan&state=&backbone=", {"plan@1"}),
    ],
)
def test_adapter_list_filters(read_site: Site, query: str, shown: set[str]) -> None:
    page = read_site.get(f"/adapters{query}")
    assert page.status_code == 200
    assert set(re.findall(r'<a href="/adapters/\d+">(\w+@\d+)</a>', page.text)) >= shown
    rows = re.findall(r'<tr data-adapter="(\d+)">', page.text)
    assert sorted(int(r) for r in rows) == sorted(read_site.ids[name] for name in shown)


def test_adapter_pages_answer_to_the_names_people_use(read_site: Site) -> None:
    """`/adapters/write@2` is the page of write@2, as `/adapters/<id>` and `/adapters/#id`
    are; the overview names a candidate's parent `write@1`, never by its id."""
    write2 = read_site.ids["write@2"]
    by_name, by_id = read_site.get("/adapters/write@2"), read_site.get(f"/adapters/{write2}")
    assert by_name.status_code == by_id.status_code == 200
    assert text_of(by_name.text) == text_of(by_id.text)
    assert "write@2 write++ approved" in text_of(by_name.text)
    assert text_of(read_site.get(f"/adapters/%23{write2}").text) == text_of(by_id.text)
    missing = read_site.get("/adapters/write@99")
    assert missing.status_code == 404
    assert "adapter write@99 does not exist (the newest is write@4)" in text_of(missing.text)
    overview = text_of(read_site.get("/").text)
    assert "write@4 write-alt write@1" in overview
    assert f"#{read_site.ids['write@1']}" not in overview


def test_adapter_page(read_site: Site) -> None:
    write2 = read_site.adapter("write@2")
    page = read_site.get(f"/adapters/{write2['id']}")
    assert page.status_code == 200
    text = text_of(page.text)
    assert "write@2 write++ approved" in text
    assert write2["manifest_root"] in text  # in full, copyable
    for digest in write2["files"].values():
        assert digest in text
    assert "data covers write" in text
    assert "no replay" in text
    assert "parent write@1" in text
    assert "Served by prod revision 2" in text
    assert "write-quality v1 0.86 20 eve" in text
    assert "No model card recorded" in text


def test_adapter_page_shows_the_model_card_and_tags_escaped(site: Site) -> None:
    api = site.api
    card = "# write, tuned\n\nCites <script>alert(1)</script> & more.\n"
    files = api.upload_adapter(seed=21) | {"README.md": api.put_blob(card.encode())}
    tags = {"dataset": "kb-v2", "note": "<i>x</i>"}
    adapter = api.adapter("write", site.backbone, files=files, tags=tags)
    page = site.get(f"/adapters/{adapter['id']}")
    assert page.status_code == 200
    assert "Cites &lt;script&gt;alert(1)&lt;/script&gt; &amp; more." in page.text
    assert "<script>alert" not in page.text
    assert "note=&lt;i&gt;x&lt;/i&gt;" in page.text
    assert '<div class="card-text markdown"><h1>write, tuned</h1>' in page.text  # rendered
    text = text_of(page.text)
    assert "Model card dataset=kb-v2 note=<i>x</i> write, tuned" in text
    assert "No model card recorded" not in text


def test_lineage_graph_has_parent_to_child_edges(read_site: Site) -> None:
    ids = read_site.ids
    page = read_site.get(f"/adapters/{ids['write@1']}").text
    edges = set(re.findall(r'<path class="edge" data-parent="(\d+)" data-child="(\d+)"', page))
    expected = {("write@1", "write@2"), ("write@2", "write@3"), ("write@1", "write@4")}
    assert edges == {(str(ids[p]), str(ids[c])) for p, c in expected}
    assert 'marker-end="url(#arrow)"' in page
    assert "write@1 → write@4 (write-alt)" in text_of(page)  # the same edges, as text
    alone = text_of(read_site.get(f"/adapters/{ids['plan@1']}").text)
    assert "plan@1 starts its own line" in alone


def test_channels_and_channel_history(read_site: Site) -> None:
    listing = text_of(read_site.get("/channels").text)
    assert "prod 2 plan plan@1 search search@1 write write@2" in listing
    assert "1 · 1 behind" in listing
    text = text_of(read_site.get("/channels/prod").text)
    assert "Channel prod revision 2" in text
    assert "write: write@1 → write@2" in text
    assert "first revision: plan plan@1 search search@1 write write@1" in text
    assert "node-1 1 1 behind audit ok" in text
    assert "refused prod on revision 2" in text


def test_revision_diff_names_the_changed_capability(read_site: Site) -> None:
    page = read_site.get("/channels/prod/diff?from=1&to=2")
    assert page.status_code == 200
    found = re.findall(r'<tr class="change-(\w+)" data-capability="(\w+)">', page.text)
    assert {cap: kind for kind, cap in found} == {
        "plan": "unchanged",
        "search": "unchanged",
        "write": "changed",
    }
    write_row = text_of(page.text.split('data-capability="write"')[1].split("</tr>")[0])
    assert re.search(r"changed write@1 \w+ write@2", write_row), write_row
    assert (
        read_site.get("/channels/prod/diff").status_code == 200
    )  # default: head and the one before


def test_gates_page(read_site: Site) -> None:
    text = text_of(read_site.get("/gates").text)
    assert "refused prod on revision 2" in text
    assert "write-quality v1 write 0.86 0.5 -0.36 0.01 paired bootstrap · n=20 · CI [" in text
    assert re.search(
        r"0\.8 0\.86 \+0\.06 0\.01 paired bootstrap · n=20 · CI \[\S+, \S+\] pass", text
    )
    assert re.search(r"-0\.36 0\.01 paired bootstrap · n=20 · CI \[\S+, \S+\] fail", text)
    assert "new channel" in text
    refused = text_of(read_site.get("/gates?outcome=refused").text)
    assert "passed prod" not in refused
    assert "refused prod" in refused
    assert "No gate report matches" in text_of(read_site.get("/gates?channel=staging").text)


def test_nodes_page(read_site: Site) -> None:
    text = text_of(read_site.get("/nodes").text)
    assert "node-1 prod 1 2 1 behind audit ok" in text
    assert read_site.backbone[:12] in text


def test_audit_page_pages_through_events(read_site: Site) -> None:
    text = text_of(read_site.get("/audit").text)
    assert "Chain intact." in text
    assert "node.report" in text
    events = read_site.api.ok("GET", "/events?limit=1000", "reader")
    first = text_of(read_site.get(f"/audit?before={events[1]['id']}").text)
    assert "token.create" in first
    assert "older events" not in first


@pytest.mark.parametrize(
    ("path", "status", "says"),
    [
        ("/", 200, "No channel yet"),
        ("/capabilities", 200, "No capability yet"),
        ("/adapters", 200, "No version matches"),
        ("/channels", 200, "No channel yet"),
        ("/channels/prod", 404, "channel 'prod' does not exist"),
        ("/channels/prod/diff", 404, "channel 'prod' does not exist"),
        ("/gates", 200, "No gate report matches"),
        ("/nodes", 200, "No node has reported yet"),
        ("/audit", 200, "Chain intact."),
    ],
)
def test_pages_of_an_empty_registry(sqlite_api: Harness, path: str, status: int, says: str) -> None:
    page = sqlite_api.client.get(path, headers=sqlite_api.auth("reader"))
    assert page.status_code == status
    assert says in html.unescape(page.text)


@pytest.mark.parametrize(
    ("path", "status", "code"),
    [
        ("/adapters/999", 404, "not_found"),
        ("/adapters/0", 422, "invalid"),
        ("/adapters/abc", 422, "invalid"),
        ("/adapters?state=bogus", 422, "invalid"),
        ("/adapters?page=0", 422, "invalid"),
        ("/channels/Prod", 422, "invalid"),
        ("/channels/prod/diff?from=1&to=9", 404, "not_found"),
        ("/gates?outcome=maybe", 422, "invalid"),
        ("/audit?before=-1", 422, "invalid"),
    ],
)
def test_bad_input_is_an_html_error_page(
    read_site: Site, path: str, status: int, code: str
) -> None:
    page = read_site.get(path)
    assert page.status_code == status
    assert page.headers["content-type"].startswith("text/html")
    assert f'data-code="{code}"' in page.text
    assert "rita" in page.text  # still signed in, the header says who


def test_pages_stay_out_of_the_api_schema_and_the_api_stays_json(read_site: Site) -> None:
    paths = read_site.api.client.get("/openapi.json").json()["paths"]
    assert all(path.startswith("/v1/") for path in paths)
    assert read_site.api.client.get("/docs").status_code == 200
    unknown = read_site.get("/v1/adapters/999")
    assert unknown.json()["error"] == "not_found"
    style = read_site.api.client.get("/static/weact.css")
    assert style.status_code == 200
    assert style.headers["content-type"].startswith("text/css")
