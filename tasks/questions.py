"""Multi-hop questions over a world, with gold answers, documents, sub-questions and searches.

Five kinds, each answered by following links from document to document:

| kind    | hops | answer         | example                                                      |
|---------|------|----------------|--------------------------------------------------------------|
| name    | 2    | a person       | Who founded the organisation that P works for?               |
| place   | 3    | a country      | In which country was the founder of O born?                  |
| year    | 2    | a year         | In what year was the city where P was born founded?          |
| number  | 2    | an integer     | How old was the founder of O when O was founded? (code phase)|
| compare | 2    | one of two     | Who was born first, P or Q? (HotpotQA's comparison type)     |

A `compare` question names its two `options`; its answer is one of them, so a method that
never retrieves anything still picks one: chance is 50 %, the floor under which a method
that answers at all cannot fall (`evals.scoring` maps a reply to the option it names).

A question's `searches` are the queries its gold trajectory issues, one per hop, and its
`steps` the facts each hop yields (used to write the gold trajectory); `supporting` lists the
gold documents by entity key until the suite assigns document ids.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from tasks.world import World

KINDS = ("name", "place", "year", "number", "compare")
DEFAULT_PHASES = ("plan", "search", "write")
CODE_PHASES = ("plan", "search", "code", "write")


@dataclass(frozen=True)
class Question:
    id: str
    split: str
    kind: str
    hops: int
    question: str
    answer: str
    supporting: tuple[str, ...]  # gold documents, one per hop, in hop order
    subquestions: tuple[str, ...]
    searches: tuple[str, ...]  # the gold queries, one per hop
    phases: tuple[str, ...]
    expression: str | None = None  # the arithmetic of a `number` question
    options: tuple[str, ...] = ()  # the answers a `compare` question offers
    facts: tuple[str, ...] = field(default=(), compare=False)  # one sentence per hop

    def to_json(self) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "id": self.id,
            "split": self.split,
            "kind": self.kind,
            "hops": self.hops,
            "question": self.question,
            "answer": self.answer,
            "supporting": list(self.supporting),
            "subquestions": list(self.subquestions),
            "searches": list(self.searches),
            "phases": list(self.phases),
            "facts": list(self.facts),
        }
        if self.expression is not None:
            obj["expression"] = self.expression
        if self.options:
            obj["options"] = list(self.options)
        return obj

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Question:
        return cls(
            id=obj["id"],
            split=obj["split"],
            kind=obj["kind"],
            hops=obj["hops"],
            question=obj["question"],
            answer=obj["answer"],
            supporting=tuple(obj["supporting"]),
            subquestions=tuple(obj["subquestions"]),
            searches=tuple(obj["searches"]),
            phases=tuple(obj["phases"]),
            expression=obj.get("expression"),
            options=tuple(obj.get("options", ())),
            facts=tuple(obj.get("facts", ())),
        )

    def with_documents(self, doc_of: dict[str, str]) -> Question:
        return replace(self, supporting=tuple(doc_of[k] for k in self.supporting))


def _name_question(w: World, anchor: str, rng: random.Random) -> dict[str, Any]:
    person = w.people[anchor]
    org = w.orgs[person.employer]
    founder = w.people[org.founder]
    return {
        "hops": 2,
        "question": f"Who founded the organisation that {person.name} works for?",
        "answer": founder.name,
        "supporting": (person.key, org.key),
        "subquestions": (
            f"Which organisation does {person.name} work for?",
            "Who founded that organisation?",
        ),
        "searches": (person.name, org.name),
        "facts": (
            f"{person.name} works for {org.name}.",
            f"{org.name} was founded by {founder.name}.",
        ),
    }


def _place_question(w: World, anchor: str, rng: random.Random) -> dict[str, Any]:
    org = w.orgs[anchor]
    founder = w.people[org.founder]
    city = w.cities[founder.birthplace]
    country = w.countries[city.country]
    return {
        "hops": 3,
        "question": f"In which country was the founder of {org.name} born?",
        "answer": country.name,
        "supporting": (org.key, founder.key, city.key),
        "subquestions": (
            f"Who founded {org.name}?",
            "In which city was that person born?",
            "In which country is that city?",
        ),
        "searches": (org.name, founder.name, f"{city.name} city"),
        "facts": (
            f"{org.name} was founded by {founder.name}.",
            f"{founder.name} was born in {city.name}.",
            f"{city.name} is in {country.name}.",
        ),
    }


def _year_question(w: World, anchor: str, rng: random.Random) -> dict[str, Any]:
    person = w.people[anchor]
    city = w.cities[person.birthplace]
    return {
        "hops": 2,
        "question": f"In what year was the city where {person.name} was born founded?",
        "answer": str(city.founded),
        "supporting": (person.key, city.key),
        "subquestions": (
            f"In which city was {person.name} born?",
            "In what year was that city founded?",
        ),
        "searches": (person.name, f"{city.name} city"),
        "facts": (
            f"{person.name} was born in {city.name}.",
            f"{city.name} was founded in {city.founded}.",
        ),
    }


def _number_question(w: World, anchor: str, rng: random.Random) -> dict[str, Any]:
    org = w.orgs[anchor]
    if rng.random() < 0.5:
        founder = w.people[org.founder]
        return {
            "hops": 2,
            "question": f"How old was the founder of {org.name} when it was founded?",
            "answer": str(org.founded - founder.born),
            "supporting": (org.key, founder.key),
            "subquestions": (
                f"When was {org.name} founded, and by whom?",
                "In what year was that person born?",
                "How many years lie between the two years?",
            ),
            "searches": (org.name, founder.name),
            "expression": f"{org.founded} - {founder.born}",
            "facts": (
                f"{org.name} was founded in {org.founded} by {founder.name}.",
                f"{founder.name} was born in {founder.born}.",
            ),
        }
    city = w.cities[org.hq]
    return {
        "hops": 2,
        "question": (
            f"How many years after its headquarters city was founded was {org.name} founded?"
        ),
        "answer": str(org.founded - city.founded),
        "supporting": (org.key, city.key),
        "subquestions": (
            f"When was {org.name} founded, and where are its headquarters?",
            "In what year was that city founded?",
            "How many years lie between the two years?",
        ),
        "searches": (org.name, f"{city.name} city"),
        "expression": f"{org.founded} - {city.founded}",
        "facts": (
            f"{org.name} was founded in {org.founded}; its headquarters are in {city.name}.",
            f"{city.name} was founded in {city.founded}.",
        ),
    }


def _compare_question(w: World, anchor: str, rng: random.Random) -> dict[str, Any]:
    first = w.people[anchor]
    others = sorted(k for k, p in w.people.items() if k != anchor and p.born != first.born)
    other = w.people[rng.choice(others)]
    options = [first, other]
    rng.shuffle(options)  # the gold answer is as often the first option as the second
    a, b = options
    earlier = a if a.born < b.born else b
    return {
        "hops": 2,
        "question": f"Who was born first, {a.name} or {b.name}?",
        "answer": earlier.name,
        "options": (a.name, b.name),
        "supporting": (a.key, b.key),
        "subquestions": (
            f"In what year was {a.name} born?",
            f"In what year was {b.name} born?",
            "Which of the two years is earlier?",
        ),
        "searches": (a.name, b.name),
        "facts": (f"{a.name} was born in {a.born}.", f"{b.name} was born in {b.born}."),
    }


_MAKERS: dict[str, tuple[Callable[[World, str, random.Random], dict[str, Any]], str]] = {
    # kind: (maker, which entities anchor it)
    "name": (_name_question, "employees"),
    "place": (_place_question, "orgs"),
    "year": (_year_question, "employees"),
    "number": (_number_question, "orgs"),
    "compare": (_compare_question, "employees"),
}


def make_questions(world: World, per_kind: int, rng: random.Random) -> list[Question]:
    """`per_kind` questions of every kind, each kind on distinct anchors of the world."""
    out = []
    for kind in KINDS:
        maker, pool = _MAKERS[kind]
        anchors = list(world.employees) if pool == "employees" else sorted(world.orgs)
        for n, anchor in enumerate(rng.sample(anchors, per_kind)):
            fields = maker(world, anchor, rng)
            phases = CODE_PHASES if kind == "number" else DEFAULT_PHASES
            out.append(
                Question(
                    id=f"{world.split}-{kind}-{n:03d}",
                    split=world.split,
                    kind=kind,
                    phases=phases,
                    **fields,
                )
            )
    return out
