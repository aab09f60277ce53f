"""Suite generation: deterministic bytes, disjoint splits, valid gold trajectories, digests."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest
from suite_helpers import SMALL

from evals.errors import SuiteError, SuiteSpecError
from evals.manifest import MANIFEST, verified_manifest
from evals.scoring import score_episode
from evals.suite import DEFAULT_SIZES, SPLITS, Suite, generate_suite, load_suite, write_suite
from tasks.questions import KINDS
from trainers.trajectory import read_trajectories


def _bytes(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir())}


def test_generation_is_byte_identical_for_a_seed(tmp_path: Path) -> None:
    a = write_suite(generate_suite(seed=11, sizes=SMALL), tmp_path / "a")
    b = write_suite(generate_suite(seed=11, sizes=SMALL), tmp_path / "b")
    c = write_suite(generate_suite(seed=12, sizes=SMALL), tmp_path / "c")
    assert _bytes(a) == _bytes(b)
    assert _bytes(a)["kb.jsonl"] != _bytes(c)["kb.jsonl"]
    assert verified_manifest(a)["digest"] != verified_manifest(c)["digest"]


def test_default_suite_has_forty_test_questions_per_kind() -> None:
    suite = generate_suite(seed=0)
    for split, n in DEFAULT_SIZES.items():
        kinds = [q.kind for q in suite.questions[split]]
        assert {k: kinds.count(k) for k in KINDS} == dict.fromkeys(KINDS, n)
    assert DEFAULT_SIZES["test"] >= 40
    assert {q.hops for q in suite.questions["test"]} == {2, 3}


def _entities(suite: Suite, split: str) -> set[str]:
    by_id = {d.id: d for d in suite.documents}
    return {by_id[doc].entity for q in suite.questions[split] for doc in q.supporting}


def test_splits_never_share_an_entity(small_suite: Suite) -> None:
    by_id = {d.id: d for d in small_suite.documents}
    for split in SPLITS:
        docs = {d for q in small_suite.questions[split] for d in q.supporting}
        assert {by_id[d].split for d in docs} == {split}
    for i, a in enumerate(SPLITS):
        for b in SPLITS[i + 1 :]:
            assert not _entities(small_suite, a) & _entities(small_suite, b)
    # names are fresh across the whole knowledge base: no entity is named twice
    titles = [d.title for d in small_suite.documents]
    assert len(set(titles)) == len(titles)


def test_answers_are_grounded_in_the_supporting_documents(small_suite: Suite) -> None:
    text = {d.id: d.text for d in small_suite.documents}
    for q in small_suite.questions["test"]:
        assert len(q.supporting) == q.hops == len(q.searches)
        if q.kind == "number":
            assert q.phases == ("plan", "search", "code", "write")
            assert q.expression is not None
            assert str(eval(q.expression)) == q.answer
            years = q.expression.split(" - ")
            assert all(any(y in text[d] for d in q.supporting) for y in years)
        elif q.kind == "compare":
            assert q.phases == ("plan", "search", "write")
            assert q.answer in q.options
            assert len(set(q.options)) == 2
            years = [int(re.search(r"born (\d{4})", text[d])[1]) for d in q.supporting]
            assert years[0] != years[1]
            assert q.answer == q.options[years.index(min(years))]
        else:
            assert q.phases == ("plan", "search", "write")
            assert q.answer in text[q.supporting[-1]]


def test_compare_answers_are_the_first_option_about_half_the_time() -> None:
    """A method that always names the first option (or the second) scores near chance."""
    suite = generate_suite("research", 3, {"train": 1, "dev": 1, "test": 40})
    compare = [q for q in suite.questions["test"] if q.kind == "compare"]
    first = sum(q.answer == q.options[0] for q in compare)
    assert len(compare) == 40
    assert 12 <= first <= 28


def test_gold_trajectories_validate_and_score_perfectly(suite_dir: Path) -> None:
    suite = load_suite(suite_dir)
    for split in SPLITS:
        trajectories = read_trajectories(suite_dir / f"trajectories-{split}.jsonl")
        assert [t.id for t in trajectories] == [q.id for q in suite.questions[split]]
        for q, t in zip(suite.questions[split], trajectories, strict=True):
            assert [p.capability for p in t.phases] == list(q.phases)
            record = score_episode(q, t.messages)
            assert (record.em, record.f1, record.doc_recall, record.plan_coverage) == (1, 1, 1, 1)


def test_searches_return_near_miss_distractors(small_suite: Suite) -> None:
    """A person's search also returns their namesake (same surname), a near miss."""
    index = small_suite.index()
    titles = {d.id: d.title for d in small_suite.documents}
    found = 0
    for q in small_suite.questions["test"]:
        if q.kind != "name":
            continue
        hits = index.search(q.searches[0])
        assert hits[0]["id"] == q.supporting[0]
        surname = titles[q.supporting[0]].split()[-1]
        found += any(titles[h["id"]].endswith(surname) for h in hits[1:])
    assert found >= 1


def test_load_refuses_a_tampered_suite(suite_dir: Path, tmp_path: Path) -> None:
    copy = Path(shutil.copytree(suite_dir, tmp_path / "copy"))
    assert load_suite(copy).digest == verified_manifest(copy)["digest"]
    path = copy / "questions-test.jsonl"
    lines = path.read_text().splitlines()
    first = json.loads(lines[0])
    first["answer"] = "somebody else"
    path.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    with pytest.raises(SuiteError, match="differs from the manifest"):
        load_suite(copy)
    manifest = json.loads((copy / MANIFEST).read_text())
    manifest["files"]["questions-test.jsonl"] = hashlib.sha256(path.read_bytes()).hexdigest()
    (copy / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(SuiteError, match="digest does not match"):
        load_suite(copy)
    (copy / MANIFEST).unlink()
    with pytest.raises(SuiteError, match="not a suite"):
        load_suite(copy)


@pytest.mark.parametrize(
    ("name", "sizes", "problem"),
    [
        ("nope", SMALL, "unknown suite"),
        ("research", {"train": 1, "dev": 1}, "must name the splits"),
        ("research", {**SMALL, "test": 0}, "questions per kind"),
        ("research", {**SMALL, "test": True}, "questions per kind"),
    ],
)
def test_bad_settings_are_refused(name: str, sizes: dict[str, int], problem: str) -> None:
    with pytest.raises(SuiteSpecError, match=problem):
        generate_suite(name, 0, sizes)
