"""A registry under test: the real ASGI app over a real database and blob store."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from factories import (
    adapter_files,
    backbone_manifest_json,
    backbone_shapes,
    sha256_bytes,
    write_adapter,
    write_backbone,
)
from fastapi.testclient import TestClient
from sqlalchemy import Engine, create_engine, func, select
from sqlalchemy.pool import NullPool

from registry.app import create_app
from registry.db import models
from registry.db.models import Base
from registry.db.session import Database
from registry.domain import Role
from registry.services.tokens import create_token
from registry.settings import Settings
from storage import BlobStore

# principal names: the publisher and the "self" approver are the same person
PRINCIPALS = {
    "admin": ("root", Role.ADMIN),
    "reader": ("rita", Role.READER),
    "publisher": ("alice", Role.PUBLISHER),
    "approver": ("bob", Role.APPROVER),
    "node": ("node-1", Role.NODE),
    "node2": ("node-2", Role.NODE),  # a node token reports as one node only
    "self_approver": ("alice", Role.APPROVER),
    "evaluator": ("eve", Role.EVALUATOR),
}

COUNTED = (
    models.SqlToken,
    models.SqlBackbone,
    models.SqlCapability,
    models.SqlAdapterVersion,
    models.SqlChannel,
    models.SqlRevision,
    models.SqlBenchmark,
    models.SqlEvaluation,
    models.SqlGateReport,
    models.SqlNode,
    models.SqlEvent,
)


@dataclass
class Harness:
    client: TestClient
    db: Database
    store: BlobStore
    tmp: Path
    tokens: dict[str, str] = field(default_factory=dict)

    # -- plumbing -------------------------------------------------------------------------
    def auth(self, who: str | None) -> dict[str, str]:
        return {} if who is None else {"Authorization": f"Bearer {self.tokens[who]}"}

    def request(self, method: str, path: str, who: str | None = "admin", **kw: Any) -> Any:
        headers = {**self.auth(who), **kw.pop("headers", {})}
        return self.client.request(method, f"/v1{path}", headers=headers, **kw)

    def ok(self, method: str, path: str, who: str | None = "admin", **kw: Any) -> Any:
        response = self.request(method, path, who, **kw)
        assert response.status_code < 300, (response.status_code, response.text)
        return response.json()

    def fails(
        self, status: int, code: str, method: str, path: str, who: str | None = "admin", **kw: Any
    ) -> Any:
        """Make a request that must fail with ``status`` and error ``code``; return detail."""
        response = self.request(method, path, who, **kw)
        assert response.status_code == status, (response.status_code, response.text)
        body = response.json()
        assert body["error"] == code, body
        return body["detail"]

    def store_files(self) -> set[str]:
        """Every blob file under a local store (for "nothing changed" checks)."""
        root = Path(self.store.root)  # type: ignore[attr-defined]
        return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}

    def counts(self) -> dict[str, int]:
        with self.db.read() as session:
            return {
                m.__tablename__: session.scalar(select(func.count()).select_from(m)) or 0
                for m in COUNTED
            }

    # -- domain helpers -------------------------------------------------------------------
    def put_blob(self, data: bytes, who: str = "publisher") -> str:
        digest = sha256_bytes(data)
        self.ok("PUT", f"/blobs/{digest}", who, content=data)
        return digest

    def backbone(self, name: str = "tiny", seed: int = 0) -> dict[str, Any]:
        path = write_backbone(self.tmp / f"backbone-{name}-{seed}", seed=seed)
        body = {"name": name, "manifest": backbone_manifest_json(path)}
        return dict(self.ok("POST", "/backbones", json=body))

    def capability(self, name: str, order: int | None = None) -> dict[str, Any]:
        body = {"name": name, "description": f"the {name} phase", "order": order}
        return dict(self.ok("POST", "/capabilities", json=body))

    def upload_adapter(self, seed: int = 1, **kw: Any) -> dict[str, str]:
        directory = write_adapter(self.tmp / f"adapter-{seed}-{len(kw)}", seed=seed, **kw)
        return {name: self.put_blob(data) for name, data in adapter_files(directory).items()}

    def adapter_body(
        self, capability: str, backbone: str, seed: int = 1, **extra: Any
    ) -> dict[str, Any]:
        files = extra.pop("files", None) or self.upload_adapter(seed)
        body = {
            "capability": capability,
            "backbone": backbone,
            "files": files,
            "provenance": {"data_digests": [], "capabilities": [capability], "replay": False},
        }
        body.update(extra)
        return body

    def adapter(
        self, capability: str, backbone: str, seed: int = 1, who: str = "publisher", **extra: Any
    ) -> dict[str, Any]:
        body = self.adapter_body(capability, backbone, seed, **extra)
        return dict(self.ok("POST", "/adapters", who, json=body))

    def approved(self, capability: str, backbone: str, seed: int = 1) -> dict[str, Any]:
        adapter = self.adapter(capability, backbone, seed)
        return dict(self.ok("POST", f"/adapters/{adapter['id']}/approve", "approver", json={}))


@dataclass
class World:
    """A backbone and the capabilities plan/search/write, ready for adapters."""

    api: Harness
    backbone: str

    def adapter(self, capability: str = "write", seed: int = 1, **extra: Any) -> dict[str, Any]:
        return self.api.adapter(capability, self.backbone, seed, **extra)

    def approved(self, capability: str = "write", seed: int = 1, **extra: Any) -> dict[str, Any]:
        adapter = self.adapter(capability, seed, **extra)
        return dict(self.api.ok("POST", f"/adapters/{adapter['id']}/approve", "approver", json={}))

    def promote(self, adapters: dict[str, int | None], **extra: Any) -> dict[str, Any]:
        body = {"backbone": self.backbone, "adapters": adapters, "create": True, **extra}
        return dict(self.api.ok("POST", "/channels/prod/promote", "approver", json=body))

    def benchmark(self, name: str, scope: str, direction: str = "higher") -> None:
        """Benchmark `name` version 1 over `scope` (a capability, or "library")."""
        body = {"name": name, "version": 1, "dataset_digest": "d" * 64, "scope": scope,
                "metric": "accuracy", "direction": direction, "tolerance": 0.01}  # fmt: skip
        self.api.ok("POST", "/benchmarks", "approver", json=body)


def make_world(api: Harness) -> World:
    root = api.backbone()["root"]
    for order, name in enumerate(("plan", "search", "write")):
        api.capability(name, order)
    return World(api=api, backbone=root)


def make_tokens(db: Database) -> dict[str, str]:
    tokens = {}
    with db.write() as session:
        for key, (name, role) in PRINCIPALS.items():
            _, tokens[key] = create_token(session=session, name=name, role=role)
    return tokens


@contextmanager
def running(client: TestClient) -> Iterator[TestClient]:
    with client:
        yield client


def shapes() -> dict[str, tuple[int, ...]]:
    return backbone_shapes()


def dumps(obj: Any) -> bytes:
    return json.dumps(obj).encode()


__all__ = ["Harness", "httpx", "make_tokens", "running"]


_PG_ENGINES: dict[str, Engine] = {}


def empty_database(url: str) -> None:
    """Delete every row (cheaper than TRUNCATE for tables this small)."""
    engine = _PG_ENGINES.setdefault(url, create_engine(url, poolclass=NullPool))
    with engine.begin() as conn:
        for table in reversed(Base.metadata.sorted_tables):
            conn.execute(table.delete())


def fresh_database(request: Any, tmp: Path) -> str:
    """The URL of an empty migrated database on the backend `request.param` names: a copy of
    the SQLite template in `tmp`, or the session's PostgreSQL database emptied."""
    if request.param == "sqlite":
        path = tmp / "registry.db"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        return f"sqlite:///{path}"
    url: str = request.getfixturevalue("pg_url")
    empty_database(url)
    return url


def build_harness(
    database_url: str, store_url: str, tmp_path: Path, **settings: object
) -> Iterator[Harness]:
    config = Settings(database_url=database_url, store_url=store_url, **settings)  # type: ignore[arg-type]
    db = Database(database_url)
    app = create_app(config, database=db)
    state = app.state.weact
    try:
        with TestClient(app) as client:
            yield Harness(
                client=client, db=db, store=state.store, tmp=tmp_path, tokens=make_tokens(db)
            )
    finally:
        db.dispose()
