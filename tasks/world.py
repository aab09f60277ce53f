"""A fictional world: countries, cities, people and organisations with years and quantities.

Names are built from syllables so that a pretrained backbone cannot know any fact about them.
Every name token is fresh across the whole suite (one `NamePool`), except on purpose: people
come in pairs sharing a surname and organisations in pairs sharing their first word, so a
search for one of them also returns its near-miss twin. One `World` per split: splits never
share an entity. Everything is drawn from the `random.Random` it is given.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

_ONSETS = "b d f g h k l m n p r s t v z br dr kr st tr".split()
_VOWELS = "a e i o u a e i o".split()
_CODAS = ["", "", "", "n", "r", "l", "s", "k", "m"]
_COUNTRY_ENDINGS = ("ia", "ora", "esh", "avia", "ir")
_ORG_KINDS = ("Dynamics", "Works", "Holdings", "Labs", "Foundry", "Systems", "Mills", "Group")


class NamePool:
    """Fresh, capitalised syllable words; no word (lowercased) is handed out twice."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set()

    def word(self, syllables: int, ending: str = "") -> str:
        for _ in range(10_000):
            parts = [
                self.rng.choice(_ONSETS) + self.rng.choice(_VOWELS) + self.rng.choice(_CODAS)
                for _ in range(syllables)
            ]
            word = ("".join(parts) + ending).capitalize()
            if word.lower() not in self.used and 4 <= len(word) <= 9:
                self.used.add(word.lower())
                return word
        raise RuntimeError("the name pool is exhausted")  # pragma: no cover - 24^3 words


@dataclass(frozen=True)
class Country:
    key: str
    name: str
    capital: str  # city key


@dataclass(frozen=True)
class City:
    key: str
    name: str
    country: str  # country key
    founded: int
    mayor: str  # person key
    population: int


@dataclass(frozen=True)
class Person:
    key: str
    name: str
    born: int
    birthplace: str  # city key
    employer: str  # org key


@dataclass(frozen=True)
class Org:
    key: str
    name: str
    founded: int
    founder: str  # person key
    hq: str  # city key
    employees: int


@dataclass(frozen=True)
class World:
    split: str
    countries: dict[str, Country]
    cities: dict[str, City]
    people: dict[str, Person]
    orgs: dict[str, Org]
    employees: tuple[str, ...]  # people who are neither founders nor mayors (question anchors)

    def entity_keys(self) -> set[str]:
        return set(self.countries) | set(self.cities) | set(self.people) | set(self.orgs)


@dataclass(frozen=True)
class WorldSize:
    """How many entities a split needs to anchor `n` questions of each kind."""

    countries: int
    cities: int
    orgs: int
    employees: int

    @classmethod
    def for_questions(cls, n: int) -> WorldSize:
        extra = max(2, n // 4)
        return cls(
            countries=max(3, n // 8), cities=max(6, n // 2), orgs=n + extra, employees=n + extra
        )


def _person_names(pool: NamePool, count: int) -> list[str]:
    """`count` full names; consecutive pairs share a surname (near-miss twins)."""
    names = []
    for i in range(count):
        if i % 2 == 0:
            surname = pool.word(2)
        names.append(f"{pool.word(2)} {surname}")
    return names


def _org_names(pool: NamePool, rng: random.Random, count: int) -> list[str]:
    """`count` organisation names; consecutive pairs share their first word."""
    names = []
    for i in range(count):
        if i % 2 == 0:
            stem = pool.word(2)
            kinds = rng.sample(_ORG_KINDS, 2)
        names.append(f"{stem} {kinds[i % 2]}")
    return names


class _Builder:
    def __init__(self, split: str, rng: random.Random, pool: NamePool, size: WorldSize) -> None:
        self.split, self.rng, self.pool, self.size = split, rng, pool, size
        self.prefix = split[:2]

    def build(self) -> World:
        size, rng = self.size, self.rng
        country_keys = [f"{self.prefix}-country-{i}" for i in range(size.countries)]
        city_keys = [f"{self.prefix}-city-{i}" for i in range(size.cities)]
        org_keys = [f"{self.prefix}-org-{i}" for i in range(size.orgs)]
        # every country gets a city first, then the rest at random
        homes = country_keys + [rng.choice(country_keys) for _ in city_keys[len(country_keys) :]]
        people_total = size.orgs + size.cities + size.employees
        names = _person_names(self.pool, people_total)
        order = list(range(people_total))
        rng.shuffle(order)  # twins end up in different roles
        person_keys = [f"{self.prefix}-person-{i}" for i in range(people_total)]
        founders = person_keys[: size.orgs]
        mayors = person_keys[size.orgs : size.orgs + size.cities]
        employees = person_keys[size.orgs + size.cities :]
        cities = {
            key: City(
                key,
                self.pool.word(2),
                homes[i],
                rng.randint(1050, 1850),
                mayors[i],
                rng.randint(3, 950) * 1000 + rng.randint(0, 999),
            )
            for i, key in enumerate(city_keys)
        }
        countries = {
            key: Country(
                key,
                self.pool.word(2, rng.choice(_COUNTRY_ENDINGS)),
                next(c for c in city_keys if cities[c].country == key),
            )
            for key in country_keys
        }
        born = {key: rng.randint(1890, 1975) for key in person_keys}
        org_names = _org_names(self.pool, rng, size.orgs)
        orgs = {
            key: Org(
                key,
                org_names[i],
                min(2020, born[founders[i]] + rng.randint(24, 60)),
                founders[i],
                rng.choice(city_keys),
                rng.randint(30, 9000),
            )
            for i, key in enumerate(org_keys)
        }
        founded_by = {org.founder: org.key for org in orgs.values()}
        people = {
            key: Person(
                key,
                names[order[n]],
                born[key],
                rng.choice(city_keys),
                founded_by.get(key) or rng.choice(org_keys),
            )
            for n, key in enumerate(person_keys)
        }
        return World(self.split, countries, cities, people, orgs, tuple(employees))


def build_world(split: str, rng: random.Random, pool: NamePool, size: WorldSize) -> World:
    """One split's world; `pool` is shared by every split so that names never repeat."""
    return _Builder(split, rng, pool, size).build()
