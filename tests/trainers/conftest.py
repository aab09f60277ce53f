"""Tiny backbone, tokenizer and trajectories, built once per test session."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_backbone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from runtime.tiny import build_tiny_backbone

    return build_tiny_backbone(tmp_path_factory.mktemp("backbone"))


@pytest.fixture(scope="session")
def tokenizer(tiny_backbone: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_backbone)
