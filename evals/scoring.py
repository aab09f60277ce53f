"""Scoring an episode against its question: pure functions, one record per item.

- `exact_match` / `token_f1`: the answer after `normalize_answer` (lower case, no punctuation,
  articles or thousands separators, single spaces), SQuAD style. A question with `options`
  (`compare`) is scored on the option the answer picks (`chosen_option`: the one named first
  in its first statement that names one), as a reader takes a free-text reply.
- `doc_recall`: the share of the gold supporting documents that the episode's searches (or
  fetches) returned.
- `plan_coverage`: for each gold sub-question, the share of its content words that the plan
  mentions; the mean over the sub-questions.

`score_episode` reads an episode's messages (the OpenAI chat shape the runtime and the
trajectories share) and returns an `ItemScore`; `METRICS` says which way each metric is
better, for the benchmarks that gate on them.
"""

from __future__ import annotations

import json
import re
import string
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from tasks.questions import Question

ANSWER_RE = re.compile(r"answer\s*:\s*(.+)", re.IGNORECASE)
METRICS = {"em": "higher", "f1": "higher", "doc_recall": "higher", "plan_coverage": "higher"}
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")
_PUNCT = str.maketrans("", "", string.punctuation)
_STOP = frozenset(
    "a an and are as at by did do does for from how in into is it its of on or that the this"
    " to was were what when where which who whom whose why with".split()
)


def normalize_answer(text: str) -> str:
    """Lower case, thousands separators, punctuation and articles removed, spaces collapsed."""
    text = _THOUSANDS.sub("", text.lower())
    text = _ARTICLES.sub(" ", text.translate(_PUNCT))
    return " ".join(text.split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str) -> float:
    """Harmonic mean of token precision and recall of the normalised answers."""
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if not pred or not ref:
        return float(pred == ref)
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def content_words(text: str) -> set[str]:
    return {w for w in normalize_answer(text).split() if w not in _STOP}


def plan_coverage(plan: str, subquestions: Sequence[str]) -> float:
    """Mean over sub-questions of the share of their content words found in the plan."""
    if not subquestions:
        return 1.0
    said = content_words(plan)
    shares = []
    for sq in subquestions:
        words = content_words(sq)
        shares.append(len(words & said) / len(words) if words else 1.0)
    return sum(shares) / len(shares)


def doc_recall(retrieved: Iterable[str], supporting: Sequence[str]) -> float:
    """Share of the gold documents among the retrieved ids (1.0 when there are none)."""
    gold = set(supporting)
    return len(gold & set(retrieved)) / len(gold) if gold else 1.0


def extract_answer(texts: Sequence[str]) -> str:
    """The text after the last `Answer:` in the texts; else the last non-empty text."""
    for text in reversed(texts):
        found = ANSWER_RE.findall(text)
        if found:
            return str(found[-1]).strip()
    return next((t.strip() for t in reversed(texts) if t.strip()), "")


_SENTENCES = re.compile(r"[^.!?\n]+[.!?]?")


def chosen_option(answer: str, options: Sequence[str]) -> str:
    """The option `answer` picks, as a reader would take a reply to a choice question: the
    option named first in its first statement that names one (a sentence that is not a
    question: "A was born before B." picks A, a reply that only asks "In what year was A
    born?" picks nothing); `answer` itself when it picks none."""
    names = [(o, f" {normalize_answer(o)} ") for o in options]
    for sentence in _SENTENCES.findall(answer):
        if sentence.strip().endswith("?"):
            continue
        said = f" {normalize_answer(sentence)} "
        named = [(said.find(n), o) for o, n in names if n in said]
        if named:
            return min(named)[1]
    return answer


@dataclass(frozen=True)
class ItemScore:
    id: str
    kind: str
    answer: str
    em: float
    f1: float
    doc_recall: float
    plan_coverage: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def metric(self, name: str) -> float:
        if name not in METRICS:
            raise KeyError(f"unknown metric {name!r}; known: {', '.join(sorted(METRICS))}")
        return float(getattr(self, name))


@dataclass(frozen=True)
class EpisodeView:
    """What scoring reads from an episode's messages."""

    assistant_texts: tuple[str, ...]
    plan: str
    retrieved: tuple[str, ...]


def _ids_in(content: str) -> list[str]:
    try:
        payload = json.loads(content)
    except (json.JSONDecodeError, TypeError):
        return []
    hits = payload if isinstance(payload, list) else [payload]
    return [h["id"] for h in hits if isinstance(h, dict) and isinstance(h.get("id"), str)]


def _switch(message: Mapping[str, Any]) -> tuple[str, str | None] | None:
    """("load", capability) / ("offload", None) for a load_lora / offload_lora call."""
    for call in message.get("tool_calls") or ():
        fn = call.get("function", call)
        if fn.get("name") == "load_lora":
            return "load", (fn.get("arguments") or {}).get("capability")
        if fn.get("name") == "offload_lora":
            return "offload", None
    return None


def _ok(content: str) -> bool:
    try:
        payload = json.loads(content)
    except (json.JSONDecodeError, TypeError):
        return False
    return isinstance(payload, dict) and payload.get("ok") is True


def view_episode(messages: Sequence[Mapping[str, Any]]) -> EpisodeView:
    """Assistant texts, the plan phase's text and the document ids the tools returned.

    The active adapter follows load_lora / offload_lora calls whose tool result says ok, so a
    refused switch (a tool error) changes nothing.
    """
    texts, plan, retrieved = [], [], []
    active: str | None = None
    pending: tuple[str, str | None] | None = None
    for m in messages:
        if m.get("role") == "assistant":
            content = m.get("content") or ""
            texts.append(content)
            if active == "plan":
                plan.append(content)
            pending = _switch(m)
        elif m.get("role") == "tool":
            name, content = m.get("name"), m.get("content") or ""
            if name in ("load_lora", "offload_lora") and pending is not None and _ok(content):
                active = pending[1] if pending[0] == "load" else None
            elif name in ("search", "fetch_document"):
                retrieved += _ids_in(content)
    return EpisodeView(tuple(texts), "\n".join(plan), tuple(retrieved))


def score_episode(question: Question, messages: Sequence[Mapping[str, Any]]) -> ItemScore:
    """The per-item record of one episode on its question."""
    view = view_episode(messages)
    answer = extract_answer(view.assistant_texts)
    if question.options:
        answer = chosen_option(answer, question.options)
    return ItemScore(
        id=question.id,
        kind=question.kind,
        answer=answer,
        em=exact_match(answer, question.answer),
        f1=token_f1(answer, question.answer),
        doc_recall=doc_recall(view.retrieved, question.supporting),
        plan_coverage=plan_coverage(view.plan, question.subquestions),
    )
