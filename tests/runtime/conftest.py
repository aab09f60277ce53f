"""Tiny backbone and three capability adapters, built once per test session."""

from __future__ import annotations

from pathlib import Path

import pytest

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
