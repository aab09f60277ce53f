"""Tiny backbone and three capability adapters, built once per test session; and the
signed-trust world of tests/support/signed_world.py as fixtures:

- `signed_database` (module; SQLite, then PostgreSQL): None or a scratch database's URL;
- `signed_world` (module): keys, an offline root, a registry on `signed_database` with
  signed, approved adapters of every capability (a module that overrides `signed_database`
  with None has it on SQLite alone);
- `signed_follow` (per test): starts `ChannelFollower`s of `signed_world`, stopped after.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from support.signed_world import World

CAPABILITIES = ("plan", "search", "write")


@pytest.fixture(scope="session")
def tiny_backbone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from runtime.tiny import build_tiny_backbone

    return build_tiny_backbone(tmp_path_factory.mktemp("backbone"))


@pytest.fixture(scope="session")
def tiny_adapters(tiny_backbone: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from runtime.tiny import build_tiny_adapter

    root = tmp_path_factory.mktemp("adapters")
    return {
        name: build_tiny_adapter(tiny_backbone, root / name, seed=i + 1)
        for i, name in enumerate(CAPABILITIES)
    }


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def signed_database(request: pytest.FixtureRequest) -> Iterator[str | None]:
    from support.signed_world import databases

    yield from databases(request.param)


@pytest.fixture(scope="module")
def signed_world(
    signed_database: str | None,
    tmp_path_factory: pytest.TempPathFactory,
    tiny_backbone: Path,
    tiny_adapters: dict[str, Path],
) -> Iterator[World]:
    from support.signed_world import world_of

    yield from world_of(signed_database, tmp_path_factory, tiny_backbone, tiny_adapters)


@pytest.fixture
def signed_follow(
    signed_world: World, tiny_backbone: Path, tmp_path: Path
) -> Iterator[Callable[..., Any]]:
    from support.signed_world import followers

    yield from followers(signed_world, tiny_backbone, tmp_path)
