"""Scoring: answer normalisation, EM/F1, document recall, plan coverage, episode records."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evals.scoring import (
    chosen_option,
    doc_recall,
    exact_match,
    extract_answer,
    normalize_answer,
    plan_coverage,
    score_episode,
    token_f1,
)
from tasks.questions import Question

words = st.text(alphabet="abcdefgh XYZ,.'-0123456789", max_size=40)


@pytest.mark.parametrize(
    ("text", "normal"),
    [
        ("The Kestrel Works.", "kestrel works"),
        ("  1,234 ", "1234"),
        ("an  Apple, a pear", "apple pear"),
        ("Velmora!", "velmora"),
    ],
)
def test_normalize_answer(text: str, normal: str) -> None:
    assert normalize_answer(text) == normal


@given(words)
def test_normalisation_is_idempotent(text: str) -> None:
    once = normalize_answer(text)
    assert normalize_answer(once) == once


@given(words, words)
def test_f1_is_bounded_symmetric_and_one_on_exact_match(a: str, b: str) -> None:
    f1 = token_f1(a, b)
    assert 0.0 <= f1 <= 1.0
    assert f1 == pytest.approx(token_f1(b, a))
    if exact_match(a, b):
        assert f1 == 1.0
    assert token_f1(a, a) == 1.0


def test_f1_gives_partial_credit() -> None:
    assert token_f1("Ora Velt", "Ora Velt") == 1.0
    assert token_f1("Ora", "Ora Velt") == pytest.approx(2 / 3)
    assert token_f1("Mira Velt", "Ora Velt") == pytest.approx(0.5)
    assert token_f1("nobody", "Ora Velt") == 0.0
    assert exact_match("the 1987.", "1987") == 1.0


@given(
    st.lists(st.sampled_from("abcdef"), max_size=8),
    st.lists(st.sampled_from("abcdef"), min_size=1, max_size=4),
)
def test_doc_recall_is_a_share_and_monotone(retrieved: list[str], gold: list[str]) -> None:
    recall = doc_recall(retrieved, gold)
    assert 0.0 <= recall <= 1.0
    assert doc_recall([*retrieved, *gold], gold) == 1.0
    assert doc_recall(retrieved + ["z"], gold) == recall


def test_plan_coverage() -> None:
    subs = ["Which organisation does Ada Vorn work for?", "Who founded that organisation?"]
    plan = "1. Where does Ada Vorn work?\n2. Who founded it?"
    # {organisation, ada, vorn, work}: 3 of 4; {founded, organisation}: 1 of 2
    assert plan_coverage(plan, subs) == pytest.approx((3 / 4 + 1 / 2) / 2)
    assert plan_coverage("", subs) == 0.0
    assert plan_coverage("anything", []) == 1.0


@given(st.lists(words, max_size=4), words)
def test_plan_coverage_is_bounded_and_full_when_the_plan_repeats(
    subs: list[str], other: str
) -> None:
    assert 0.0 <= plan_coverage(other, subs) <= 1.0
    assert plan_coverage("\n".join(subs), subs) == 1.0


def test_extract_answer_takes_the_last_answer_line() -> None:
    assert extract_answer(["Answer: a", "x\nAnswer: Ora Velt\n", "Done."]) == "Ora Velt"
    assert extract_answer(["no marker here", ""]) == "no marker here"
    assert extract_answer([]) == ""


def _q() -> Question:
    return Question(
        id="q1", split="test", kind="name", hops=2, question="Who?", answer="Ora Velt",
        supporting=("d1", "d2"), searches=("Ada", "Org"), phases=("plan", "search", "write"),
        subquestions=("Which organisation employs Ada?", "Who founded it?"),
    )  # fmt: skip


def _call(name: str, **arguments: object) -> dict[str, object]:
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


def _a(content: str, *calls: dict[str, object]) -> dict[str, object]:
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


def _t(name: str, payload: object) -> dict[str, object]:
    return {"role": "tool", "name": name, "content": json.dumps(payload)}


def test_score_episode_reads_plan_searches_and_answer() -> None:
    messages = [
        {"role": "user", "content": "Who?"},
        _a("", _call("load_lora", capability="plan")),
        _t("load_lora", {"ok": True, "active": "plan"}),
        _a("1. Which organisation employs Ada?", _call("offload_lora")),
        _t("offload_lora", {"ok": True, "active": None}),
        _a("", _call("load_lora", capability="write")),  # refused: never became active
        _t("load_lora", {"error": "load 'search' next"}),
        _a("Answer: the plan is not here"),
        _a("", _call("search", query="Ada")),
        _t("search", [{"id": "d1", "text": "..."}, {"id": "d9", "text": "..."}]),
        _a("Answer: Mira Velt"),
    ]
    record = score_episode(_q(), messages)
    assert record.answer == "Mira Velt"
    assert (record.em, record.f1, record.doc_recall) == (0.0, 0.5, 0.5)
    assert record.plan_coverage == pytest.approx((1.0 + 0.0) / 2)
    assert record.metric("f1") == 0.5
    with pytest.raises(KeyError, match="unknown metric"):
        record.metric("bleu")


@pytest.mark.parametrize(
    ("answer", "chosen"),
    [
        ("Ora Velt", "Ora Velt"),
        ("I think ora velt was born first.", "Ora Velt"),
        ("Mira Velt was born before Ora Velt.", "Mira Velt"),
        ("Ora Velt was born first. Mira Velt was born later.", "Ora Velt"),
        ("Born 1950.\nMira Velt, then Ora Velt", "Mira Velt"),  # the first line names none
        ("1. In what year was Ora Velt born?\n2. In what year was Mira Velt born?",
         "1. In what year was Ora Velt born?\n2. In what year was Mira Velt born?"),
        ("Velt", "Velt"),  # neither named whole
        ("Orav Velt", "Orav Velt"),
    ],
)  # fmt: skip
def test_a_reply_picks_the_option_its_first_statement_names_first(answer: str, chosen: str) -> None:
    assert chosen_option(answer, ("Ora Velt", "Mira Velt")) == chosen


@given(words, st.lists(words, min_size=2, max_size=3))
def test_chosen_option_is_an_option_or_the_answer_itself(answer: str, options: list[str]) -> None:
    chosen = chosen_option(answer, options)
    assert chosen == answer or chosen in options


def test_a_compare_question_is_scored_on_the_option_named() -> None:
    q = Question(
        id="q", split="test", kind="compare", hops=2, question="Who was born first, A B or C D?",
        answer="C D", supporting=("d1", "d2"), subquestions=(), searches=(), phases=(),
        options=("A B", "C D"),
    )  # fmt: skip
    said = [{"role": "assistant", "content": "In what year was C D born?"}]
    assert score_episode(q, said).em == 0.0  # a question picks nothing
    said = [{"role": "assistant", "content": "A B was born after 1950."}]
    assert score_episode(q, said).em == 0.0  # picks A B
    said = [{"role": "assistant", "content": "The answer is: C D."}]
    record = score_episode(q, said)
    assert (record.answer, record.em) == ("C D", 1.0)
