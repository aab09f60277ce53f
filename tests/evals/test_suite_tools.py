"""The suite's tools: BM25 search, fetch_document and calculate, in process and over MCP."""

from __future__ import annotations

import json

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp import Client

from evals.suite import Suite
from runtime.mcp_client import McpToolbox
from tasks.calc import calculate
from tasks.errors import ExpressionError, UnknownDocumentError
from tasks.search import MAX_K
from tasks.tools import TOOL_SCHEMAS, plain_schema, serve_tools


def test_search_ranks_the_named_entity_first_and_is_deterministic(small_suite: Suite) -> None:
    index = small_suite.index()
    for q in small_suite.questions["dev"]:
        for query, doc in zip(q.searches, q.supporting, strict=True):
            hits = index.search(query, 5)
            assert doc in [h["id"] for h in hits]
            assert hits == index.search(query, 5)
            assert all(set(h) == {"id", "text"} for h in hits)
    assert index.search("zzzq qqqz") == []
    assert index.search("the of and") == []


@pytest.mark.parametrize(
    ("query", "k"), [("", 2), ("x", 0), ("x", MAX_K + 1), ("x", True), ("x" * 501, 2)]
)
def test_search_refuses_bad_input(small_suite: Suite, query: str, k: int) -> None:
    with pytest.raises(ValueError, match="query must|k must"):
        small_suite.index().search(query, k)


def test_fetch_document(small_suite: Suite) -> None:
    doc = small_suite.documents[3]
    assert small_suite.index().fetch(doc.id) == {"id": doc.id, "title": doc.title, "text": doc.text}
    with pytest.raises(UnknownDocumentError, match="no document 'd999999'"):
        small_suite.index().fetch("d999999")


@pytest.mark.parametrize(
    ("expression", "value"),
    [("1987 - 1942", 45), ("(3 + 4) * 2", 14), ("7 / 2", 3.5), ("2 ** 10", 1024), ("-5 + 1", -4)],
)
def test_calculate(expression: str, value: float) -> None:
    assert calculate(expression) == value


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("__import__('os')", "only numbers"),
        ("x + 1", "only numbers"),
        ("'a' * 3", "only numbers"),
        ("1 / 0", "division by zero"),
        ("9 ** 99", "exponents"),
        ("10 ** 40", "out of range"),
        ("1 +", "not an expression"),
        ("", "non-empty"),
        ("1" * 300, "at most"),
    ],
)
def test_calculate_refuses_anything_but_arithmetic(expression: str, problem: str) -> None:
    with pytest.raises(ExpressionError, match=problem):
        calculate(expression)


@given(st.integers(-(10**6), 10**6), st.integers(-(10**6), 10**6))
def test_calculate_agrees_with_python_on_integers(a: int, b: int) -> None:
    assert calculate(f"{a} - {b}") == a - b
    assert calculate(f"{a} * ({b})") == a * b


def test_tools_over_mcp_match_the_schemas_the_trajectories_show(small_suite: Suite) -> None:
    q = small_suite.questions["test"][0]

    async def main():  # type: ignore[no-untyped-def]
        server = serve_tools(small_suite.index())
        async with Client(server) as client:
            listed = (await client.list_tools()).tools
        async with McpToolbox([serve_tools(small_suite.index())]) as box:
            hit = await box.call("search", {"query": q.searches[0]})
            fetched = await box.call("fetch_document", {"id": q.supporting[0]})
            calc = await box.call("calculate", {"expression": "1987 - 1942"})
            bad = await box.call("calculate", {"expression": "open('x')"})
            missing = await box.call("fetch_document", {"id": "nope"})
        return listed, hit, fetched, calc, bad, missing

    listed, hit, fetched, calc, bad, missing = anyio.run(main)
    served = {t.name: (t.description, plain_schema(t.input_schema)) for t in listed}
    shown = {
        s["function"]["name"]: (s["function"]["description"], s["function"]["parameters"])
        for s in TOOL_SCHEMAS
    }
    assert served == shown
    # the text the model reads is exactly what the gold trajectory holds for that search
    assert hit.content == json.dumps(small_suite.index().search(q.searches[0]))
    assert json.loads(fetched.content)["id"] == q.supporting[0]
    assert calc.content == '{"value": 45}'
    assert bad.is_error
    assert "only numbers" in bad.message
    assert missing.is_error
    assert "no document" in missing.message
