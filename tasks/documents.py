"""The knowledge base of a suite: one short document per entity of every split's world.

Each document states its entity's facts in one or two sentences that name the linked
entities (a person's birthplace and employer, an organisation's founder and headquarters),
so that answering a question means following those links from document to document.
Documents are sorted by title and numbered `d000`, `d001`, ...: ids say nothing about the
split or the kind of entity.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tasks.world import World


@dataclass(frozen=True)
class Document:
    id: str
    title: str
    text: str
    entity: str  # the world key it describes, e.g. "te-person-3"
    split: str

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "text": self.text,
            "entity": self.entity,
            "split": self.split,
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Document:
        return cls(obj["id"], obj["title"], obj["text"], obj["entity"], obj["split"])


def _entity_texts(world: World) -> Iterable[tuple[str, str, str]]:
    """(entity key, title, text) for every entity of the world."""
    cities, people, orgs = world.cities, world.people, world.orgs
    for c in world.countries.values():
        yield c.key, c.name, f"{c.name} is a country; capital {cities[c.capital].name}."
    for city in cities.values():
        country = world.countries[city.country].name
        mayor = people[city.mayor].name
        yield (
            city.key,
            city.name,
            f"{city.name}, a city in {country}, was founded in {city.founded}; "
            f"mayor {mayor}; population {city.population}.",
        )
    for p in people.values():
        yield (
            p.key,
            p.name,
            f"{p.name}, born {p.born} in {cities[p.birthplace].name}, "
            f"works for {orgs[p.employer].name}.",
        )
    for o in orgs.values():
        yield (
            o.key,
            o.name,
            f"{o.name} was founded in {o.founded} by {people[o.founder].name}; "
            f"headquarters {cities[o.hq].name}; {o.employees} employees.",
        )


def build_documents(worlds: Iterable[World]) -> list[Document]:
    """Every entity's document, sorted by title, with ids in that order."""
    rows = sorted(
        (title, key, text, world.split)
        for world in worlds
        for key, title, text in _entity_texts(world)
    )
    width = max(3, len(str(len(rows) - 1)))
    return [
        Document(f"d{i:0{width}d}", title, text, key, split)
        for i, (title, key, text, split) in enumerate(rows)
    ]
