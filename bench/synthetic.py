"""What the benchmarks set up, from the product alone (bench/ imports nothing of tests/).

- `write_backbone(dir)`, `write_adapter(dir, seed=)`, `adapter_files(dir)`: numpy weights in
  safetensors files, llama-like names, small and distinct per seed: the registry stores,
  digests and fits them like real ones, and writing a thousand takes seconds.
- `scratch_database(server_url)`: a PostgreSQL database of its own, dropped afterwards.
- `Seeded`: clients of each role on a registry with a backbone and capabilities, and the
  publish (push + approve) and promote steps a benchmark times around.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import save_file

from registry.client import RegistryClient
from registry.launcher import EmbeddedRegistry
from storage import manifest_of_file

HIDDEN = 32
LAYERS = 2
TARGETS = ("q_proj", "v_proj")


def _backbone_shapes() -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (100, HIDDEN)}
    for i in range(LAYERS):
        prefix = f"model.layers.{i}"
        shapes[f"{prefix}.self_attn.q_proj.weight"] = (2 * HIDDEN, HIDDEN)
        shapes[f"{prefix}.self_attn.k_proj.weight"] = (HIDDEN, HIDDEN)
        shapes[f"{prefix}.self_attn.v_proj.weight"] = (HIDDEN, HIDDEN)
        shapes[f"{prefix}.self_attn.o_proj.weight"] = (HIDDEN, 2 * HIDDEN)
        shapes[f"{prefix}.input_layernorm.weight"] = (HIDDEN,)
    shapes["model.norm.weight"] = (HIDDEN,)
    return shapes


def write_backbone(directory: Path, seed: int = 0) -> Path:
    """`directory/model.safetensors`; returns the file."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    tensors = {
        name: rng.standard_normal(shape).astype(np.float32)
        for name, shape in _backbone_shapes().items()
    }
    path = directory / "model.safetensors"
    save_file(tensors, str(path))
    return path


def backbone_manifest_json(path: Path) -> dict[str, Any]:
    return manifest_of_file(path).to_json()


def write_adapter(directory: Path, *, seed: int = 1, r: int = 4) -> Path:
    """A PEFT adapter directory (rank `r` on q_proj and v_proj) that fits `write_backbone`."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    tensors = {}
    for name, shape in _backbone_shapes().items():
        module = name.removesuffix(".weight")
        if module.rsplit(".", 1)[-1] in TARGETS:
            key = f"base_model.model.{module}"
            tensors[f"{key}.lora_A.weight"] = rng.standard_normal((r, shape[1])).astype(np.float32)
            tensors[f"{key}.lora_B.weight"] = rng.standard_normal((shape[0], r)).astype(np.float32)
    save_file(tensors, str(directory / "adapter_model.safetensors"))
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "r": r,
        "lora_alpha": 2 * r,
        "target_modules": sorted(TARGETS),
        "lora_dropout": 0.0,
        "bias": "none",
        "base_model_name_or_path": "synthetic-backbone",
    }
    (directory / "adapter_config.json").write_text(json.dumps(config, indent=2))
    return directory


def adapter_files(directory: Path) -> dict[str, bytes]:
    """File name -> bytes of an adapter directory."""
    return {
        name: (directory / name).read_bytes()
        for name in ("adapter_config.json", "adapter_model.safetensors")
    }


@contextmanager
def scratch_database(server_url: str, prefix: str = "weact_bench") -> Iterator[str]:
    """The URL of a fresh PostgreSQL database on `server_url` (any database of that server,
    e.g. `postgresql+psycopg://postgres@127.0.0.1:5432/postgres`), dropped on exit."""
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(server_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


@dataclass
class Seeded:
    """Clients of every role on one registry, a registered backbone and capabilities."""

    admin: RegistryClient
    publisher: RegistryClient
    approver: RegistryClient
    tokens: dict[str, str]
    backbone_root: str
    order: list[str]

    @classmethod
    def create(
        cls, server: EmbeddedRegistry, backbone_manifest: Mapping[str, Any], order: list[str]
    ) -> Seeded:
        admin = RegistryClient(server.url, server.bootstrap_token("bench-admin", "admin"))
        tokens = {
            role: admin.create_token(name=f"bench-{role}", role=role)["token"]
            for role in ("publisher", "approver", "node", "reader")
        }
        root = admin.register_backbone(name="bench", manifest=backbone_manifest)["root"]
        for position, name in enumerate(order):
            admin.create_capability(name=name, description=f"The {name} phase.", order=position)
        publisher = RegistryClient(server.url, tokens["publisher"])
        approver = RegistryClient(server.url, tokens["approver"])
        return cls(admin, publisher, approver, tokens, root, list(order))

    def publish(self, directory: Path, capability: str) -> dict[str, Any]:
        pushed = self.publisher.push_adapter(
            directory, capability=capability, backbone=self.backbone_root
        )
        return dict(self.approver.approve(pushed["id"]))

    def promote(self, channel: str, adapters: Mapping[str, int | None]) -> int:
        result = self.approver.promote(
            channel, dict(adapters), backbone=self.backbone_root, order=self.order, create=True
        )
        return int(result["revision"]["revision"])

    def head(self, channel: str) -> int:
        return int(self.admin.get_channel(channel)["revision"])

    def close(self) -> None:
        for client in (self.admin, self.publisher, self.approver):
            client.close()


@contextmanager
def bench_database(kind: str, tmp: Path, pg_url: str, prefix: str = "weact_bench") -> Iterator[str]:
    """A database URL for a bench: a file under `tmp` (sqlite) or a scratch PostgreSQL one."""
    if kind == "sqlite":
        yield f"sqlite:///{tmp / 'registry.db'}"
        return
    with scratch_database(pg_url, prefix=prefix) as url:
        yield url
