"""The lineage graph's layout, on random family trees (hypothesis): every edge runs from a
parent's right side to its child's left side, one generation per column, no box overlaps."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from registry.domain import AdapterState, AdapterVersion, Lineage
from registry.web.lineage import BOX_H, GAP_X, MAX_BOX_W, lineage_graph

WHEN = datetime(2026, 1, 1, tzinfo=UTC)


def version(adapter_id: int, parent: int | None, label: str | None = None) -> AdapterVersion:
    return AdapterVersion(
        id=adapter_id,
        name=f"write@{adapter_id}",
        capability="write",
        backbone="b" * 64,
        version=adapter_id,
        label=label,
        parent_id=parent,
        state=AdapterState.APPROVED,
        rank=4,
        alpha=8.0,
        target_modules=["q_proj"],
        files={},
        manifest_root=f"{adapter_id:064x}",
        provenance={},
        created_by="alice",
        created_at=WHEN,
    )


@st.composite
def family(draw: st.DrawFn) -> tuple[list[AdapterVersion], int]:
    """A tree of versions (each parent has a lower id) and the id of one of them."""
    size = draw(st.integers(1, 14))
    parents = [None] + [draw(st.integers(1, i)) for i in range(1, size)]
    labels = draw(
        st.lists(st.none() | st.text(min_size=1, max_size=60), min_size=size, max_size=size)
    )
    versions = [version(i + 1, parents[i], labels[i]) for i in range(size)]
    return versions, draw(st.integers(1, size))


def lineage_of(versions: list[AdapterVersion], chosen: int) -> Lineage:
    """What ``adapters.lineage`` returns: ancestors (oldest first), the version, descendants."""
    by_id = {v.id: v for v in versions}
    ancestors = []
    parent = by_id[chosen].parent_id
    while parent is not None:
        ancestors.append(by_id[parent])
        parent = by_id[parent].parent_id
    below, frontier = [], {chosen}
    while frontier:
        children = [v for v in versions if v.parent_id in frontier]
        below += children
        frontier = {v.id for v in children}
    return Lineage(list(reversed(ancestors)), by_id[chosen], sorted(below, key=lambda v: v.id))


@given(family())
def test_edges_go_from_parent_to_child(tree: tuple[list[AdapterVersion], int]) -> None:
    versions, chosen = tree
    lineage = lineage_of(versions, chosen)
    graph = lineage_graph(lineage)
    members = [*lineage.ancestors, lineage.adapter, *lineage.descendants]
    placed = {node.adapter.id: node for node in graph.nodes}
    assert set(placed) == {v.id for v in members}
    expected = {(v.parent_id, v.id) for v in members if v.parent_id in placed}
    assert {(e.parent, e.child) for e in graph.edges} == expected
    for edge in graph.edges:
        parent, child = placed[edge.parent], placed[edge.child]
        assert child.x == parent.x + graph.box_w + GAP_X  # the next column, to the right
        assert edge.path.startswith(f"M{parent.x + graph.box_w},{parent.y + BOX_H // 2} ")
        assert edge.path.endswith(f" {child.x - 2},{child.y + BOX_H // 2}")
    assert [n.adapter.id for n in graph.nodes if n.current] == [chosen]


@given(family())
def test_boxes_fit_and_never_overlap(tree: tuple[list[AdapterVersion], int]) -> None:
    graph = lineage_graph(lineage_of(*tree))
    assert graph.box_w <= MAX_BOX_W
    boxes = [(n.x, n.y) for n in graph.nodes]
    for x, y in boxes:
        assert 0 <= x
        assert x + graph.box_w <= graph.width
        assert 0 <= y
        assert y + BOX_H <= graph.height
    for i, (x1, y1) in enumerate(boxes):
        for x2, y2 in boxes[i + 1 :]:
            apart_x = x1 + graph.box_w <= x2 or x2 + graph.box_w <= x1
            apart_y = y1 + BOX_H <= y2 or y2 + BOX_H <= y1
            assert apart_x or apart_y
    for node in graph.nodes:  # a caption fits its box (cut with an ellipsis when too long)
        assert len(node.caption) * 7.6 + 24 <= graph.box_w + 7.6
