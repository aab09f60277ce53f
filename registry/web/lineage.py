"""The lineage of an adapter version as a graph laid out for SVG: parent -> child, left to right.

The graph holds the version, its ancestors (a chain) and every descendant (a tree). Each
generation is one column; a column's versions are stacked by id and centred vertically.
An edge runs from the right side of the parent's box to the left side of the child's.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from registry.domain import AdapterVersion, Lineage

BOX_W = 150  # at least; wider when a name and label need it
MAX_BOX_W = 280
CHAR_W = 7.6  # a generous average advance of the 13 px bold label
BOX_H = 46
GAP_X = 60
GAP_Y = 18
PAD = 12


@dataclass(frozen=True)
class GraphNode:
    adapter: AdapterVersion
    x: int
    y: int
    current: bool
    caption: str


@dataclass(frozen=True)
class GraphEdge:
    parent: int
    child: int
    path: str


@dataclass(frozen=True)
class Graph:
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    width: int
    height: int
    box_w: int = BOX_W
    box_h: int = BOX_H


def caption(adapter: AdapterVersion) -> str:
    """The first line of a version's box: ``write@2 · write++``."""
    return adapter.name + (f" · {adapter.label}" if adapter.label else "")


def _fit(text: str, box_w: int) -> str:
    room = int((box_w - 24) / CHAR_W)
    return text if len(text) <= room else text[: room - 1] + "…"


def _box_width(adapters: list[AdapterVersion]) -> int:
    widest = max(len(caption(a)) for a in adapters)
    return max(BOX_W, min(MAX_BOX_W, math.ceil(24 + widest * CHAR_W)))


def _generations(members: dict[int, AdapterVersion], root: int) -> list[list[int]]:
    """Version ids by generation, starting at ``root``, each generation sorted by id."""
    children: dict[int, list[int]] = defaultdict(list)
    for adapter in members.values():
        if adapter.parent_id in members and adapter.id != root:
            children[adapter.parent_id].append(adapter.id)
    columns: list[list[int]] = []
    frontier = [root]
    while frontier:
        columns.append(sorted(frontier))
        frontier = [child for parent in frontier for child in children[parent]]
    return columns


def _edge_path(parent: GraphNode, child: GraphNode, box_w: int) -> str:
    x1, y1 = parent.x + box_w, parent.y + BOX_H // 2
    x2, y2 = child.x, child.y + BOX_H // 2
    mid = (x1 + x2) // 2
    return f"M{x1},{y1} C{mid},{y1} {mid},{y2} {x2 - 2},{y2}"


def lineage_graph(lineage: Lineage) -> Graph:
    """Lay out ``lineage`` (see the module docstring)."""
    chain = [*lineage.ancestors, lineage.adapter, *lineage.descendants]
    members = {adapter.id: adapter for adapter in chain}
    columns = _generations(members, chain[0].id)
    box_w = _box_width(chain)
    tallest = max(len(column) for column in columns)
    height = 2 * PAD + tallest * BOX_H + (tallest - 1) * GAP_Y
    placed: dict[int, GraphNode] = {}
    for depth, column in enumerate(columns):
        used = len(column) * BOX_H + (len(column) - 1) * GAP_Y
        top = (height - used) // 2
        for row, adapter_id in enumerate(column):
            placed[adapter_id] = GraphNode(
                adapter=members[adapter_id],
                x=PAD + depth * (box_w + GAP_X),
                y=top + row * (BOX_H + GAP_Y),
                current=adapter_id == lineage.adapter.id,
                caption=_fit(caption(members[adapter_id]), box_w),
            )
    edges = [
        GraphEdge(parent, node.adapter.id, _edge_path(placed[parent], node, box_w))
        for node in placed.values()
        if (parent := node.adapter.parent_id) is not None and parent in placed
    ]
    width = 2 * PAD + len(columns) * box_w + (len(columns) - 1) * GAP_X
    return Graph(list(placed.values()), edges, width, height, box_w=box_w)
