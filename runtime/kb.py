"""A small deterministic offline knowledge base and its MCP `search` tool.

`DOCUMENTS` holds a few dozen short facts (cities, science, history, technology). `search`
ranks them by term overlap with the query (title terms count double; ties break by id), so
results never depend on time, randomness or a network. The demo, the benchmarks and the
trainers' trajectory generator use it; `serve_search_tool()` exposes it as an external MCP
tool, and `python -m runtime.kb` serves that over stdio.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp.server import MCPServer

MAX_K = 20
SEARCH_DESCRIPTION = "Search the offline knowledge base; returns the k best documents."
SNIPPET_CHARS = 160


@dataclass(frozen=True)
class Document:
    id: str
    title: str
    text: str


_DOCS = [
    (
        "paris",
        "Paris",
        "Paris is the capital of France, on the Seine, with about 2.1 million people.",
    ),
    ("berlin", "Berlin", "Berlin is the capital of Germany; the Berlin Wall fell in 1989."),
    ("madrid", "Madrid", "Madrid is the capital of Spain and its largest city, on the Manzanares."),
    ("rome", "Rome", "Rome is the capital of Italy; the Colosseum was completed in 80 AD."),
    ("tokyo", "Tokyo", "Tokyo is the capital of Japan and the most populous metropolitan area."),
    ("canberra", "Canberra", "Canberra, not Sydney, is the capital of Australia, chosen in 1908."),
    ("ottawa", "Ottawa", "Ottawa is the capital of Canada, in the province of Ontario."),
    ("brasilia", "Brasilia", "Brasilia became the capital of Brazil in 1960, replacing Rio."),
    ("cairo", "Cairo", "Cairo is the capital of Egypt, on the Nile, near the Giza pyramids."),
    ("nairobi", "Nairobi", "Nairobi is the capital of Kenya and a hub of East African business."),
    ("seoul", "Seoul", "Seoul is the capital of South Korea, on the Han River."),
    ("ankara", "Ankara", "Ankara, not Istanbul, is the capital of Turkey since 1923."),
    ("water", "Water", "Water boils at 100 degrees Celsius at sea level and freezes at 0."),
    ("light", "Speed of light", "Light travels at about 299,792 kilometres per second in vacuum."),
    (
        "gravity",
        "Gravity",
        "Gravity on Earth accelerates objects at about 9.81 metres per second squared.",
    ),
    (
        "dna",
        "DNA",
        "DNA is a double helix; its structure was described by Watson and Crick in 1953.",
    ),
    (
        "photosynthesis",
        "Photosynthesis",
        "Plants turn light, water and carbon dioxide into sugar and oxygen.",
    ),
    (
        "everest",
        "Mount Everest",
        "Mount Everest is the highest mountain above sea level, 8,849 metres.",
    ),
    ("amazon", "Amazon River", "The Amazon carries more water than any other river on Earth."),
    ("moon", "Moon landing", "Apollo 11 landed on the Moon in July 1969; Armstrong walked first."),
    (
        "mars",
        "Mars",
        "Mars is the fourth planet from the Sun and has two moons, Phobos and Deimos.",
    ),
    ("jupiter", "Jupiter", "Jupiter is the largest planet of the solar system, a gas giant."),
    (
        "periodic",
        "Periodic table",
        "Mendeleev published the periodic table of the elements in 1869.",
    ),
    ("penicillin", "Penicillin", "Alexander Fleming discovered penicillin in 1928 in London."),
    (
        "printing",
        "Printing press",
        "Gutenberg built a movable-type printing press around 1440 in Mainz.",
    ),
    ("internet", "Internet", "The internet grew from ARPANET, whose first link ran in 1969."),
    ("www", "World Wide Web", "Tim Berners-Lee proposed the World Wide Web at CERN in 1989."),
    (
        "transformer",
        "Transformer",
        "The transformer architecture for language models appeared in 2017.",
    ),
    ("lora", "LoRA", "LoRA adapts a frozen model by adding trainable low-rank weight matrices."),
    (
        "python",
        "Python",
        "Python is a programming language first released by Guido van Rossum in 1991.",
    ),
    (
        "everest-climb",
        "First Everest ascent",
        "Hillary and Norgay reached the summit of Everest in 1953.",
    ),
    ("nile", "Nile", "The Nile flows north through Egypt into the Mediterranean Sea."),
]
DOCUMENTS: tuple[Document, ...] = tuple(Document(*d) for d in _DOCS)

_STOP = frozenset(
    "a an and are as at by for from in into is it its of on or the to was were what which who"
    " whose how when where why with not".split()
)


def terms(text: str) -> list[str]:
    return [t for t in re.findall(r"[a-z0-9]+", text.lower()) if t not in _STOP]


def _score(query: set[str], doc: Document) -> float:
    title, body = set(terms(doc.title)), set(terms(doc.text))
    return float(2 * len(query & title) + len(query & body))


def search(query: str, k: int = 3) -> list[dict[str, Any]]:
    """The k best documents for `query` by term overlap; empty when nothing matches."""
    if not isinstance(query, str):
        raise TypeError("query must be a string")
    if not 1 <= k <= MAX_K:
        raise ValueError(f"k must be between 1 and {MAX_K}")
    wanted = set(terms(query))
    scored = [(_score(wanted, d), d) for d in DOCUMENTS]
    ranked = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1].id))
    return [
        {"id": d.id, "title": d.title, "snippet": d.text[:SNIPPET_CHARS], "score": score}
        for score, d in ranked[:k]
    ]


def serve_search_tool() -> MCPServer:
    """An MCP server with one external tool, `search(query, k)`."""
    from mcp.server import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    server: MCPServer = MCPServer("weact-kb", instructions="Search a small offline knowledge base.")

    def search_tool(query: str, k: int = 3) -> list[dict[str, Any]]:
        try:
            return search(query, k)
        except ValueError as exc:
            raise ToolError(str(exc)) from exc

    server.add_tool(search_tool, name="search", description=SEARCH_DESCRIPTION)
    return server


if __name__ == "__main__":  # pragma: no cover - exercised through a subprocess
    serve_search_tool().run("stdio")
