from __future__ import annotations

import json

import anyio
import pytest
from mcp import Client

from runtime import kb


def test_documents_are_a_few_dozen_with_unique_ids() -> None:
    ids = [d.id for d in kb.DOCUMENTS]
    assert 24 <= len(ids) <= 60
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize(
    ("query", "best"),
    [
        ("capital of France", "paris"),
        ("When did the Berlin Wall fall?", "berlin"),
        ("highest mountain", "everest"),
        ("who discovered penicillin", "penicillin"),
        ("LoRA low-rank adapters", "lora"),
    ],
)
def test_search_ranks_by_term_overlap(query, best) -> None:
    results = kb.search(query)
    assert results[0]["id"] == best
    assert set(results[0]) == {"id", "title", "snippet", "score"}
    assert [r["score"] for r in results] == sorted((r["score"] for r in results), reverse=True)


def test_search_is_deterministic_and_bounded() -> None:
    assert kb.search("capital", k=5) == kb.search("capital", k=5)
    assert len(kb.search("capital", k=5)) == 5
    assert kb.search("zzzz qqqq") == []
    assert kb.search("the of and") == []  # stop words only


@pytest.mark.parametrize("k", [0, -1, kb.MAX_K + 1])
def test_search_rejects_bad_k(k) -> None:
    with pytest.raises(ValueError, match="k must be"):
        kb.search("paris", k)


def test_search_tool_over_mcp() -> None:
    async def main():
        async with Client(kb.serve_search_tool()) as client:
            tools = (await client.list_tools()).tools
            ok = await client.call_tool("search", {"query": "capital of Japan", "k": 1})
            bad = await client.call_tool("search", {"query": "x", "k": 0})
            return tools, ok, bad

    tools, ok, bad = anyio.run(main)
    assert [t.name for t in tools] == ["search"]
    assert ok.structured_content["result"][0]["id"] == "tokyo"
    assert json.loads(ok.content[0].text)["id"] == "tokyo"
    assert bad.is_error
    assert "k must be" in bad.content[0].text
