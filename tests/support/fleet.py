"""A fleet under test: registry processes on one PostgreSQL database, and a seeded registry.

- `fresh_pg_database()`: a uniquely named database on the shared server, migrated to head,
  dropped afterwards (raises `PostgresUnavailable` when there is no server).
- `Seeded`: clients of each role over one registry URL, with a backbone, capabilities in
  hard order and helpers to publish (push + approve), promote, roll back and revoke.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from registry.client import RegistryClient
from support.serving import RunningRegistry

PG_SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432"


class PostgresUnavailable(RuntimeError):
    pass


@contextmanager
def fresh_pg_database(prefix: str = "weact_fleet") -> Iterator[str]:
    from sqlalchemy import create_engine

    from registry.db.migrate import upgrade

    admin = create_engine(f"{PG_SERVER}/postgres", isolation_level="AUTOCOMMIT")
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    except Exception as exc:
        admin.dispose()
        raise PostgresUnavailable(str(exc)) from exc
    url = f"{PG_SERVER}/{name}"
    try:
        upgrade(url)  # before any process starts: replicas must not race to migrate
        yield url
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


@dataclass
class Seeded:
    """Clients of every role on one registry, a registered backbone and capabilities."""

    url: str
    admin: RegistryClient
    publisher: RegistryClient
    approver: RegistryClient
    tokens: dict[str, str]
    backbone_root: str
    order: list[str]
    adapters: dict[str, dict[str, Any]] = field(default_factory=dict)  # by name (write@2)

    @classmethod
    def create(
        cls,
        server: RunningRegistry,
        backbone_manifest: Mapping[str, Any],
        order: list[str],
    ) -> Seeded:
        admin = RegistryClient(server.url, server.bootstrap_token("fleet-admin", "admin"))
        tokens = {
            role: admin.create_token(name=f"fleet-{role}", role=role)["token"]
            for role in ("publisher", "approver", "node", "reader")
        }
        root = admin.register_backbone(name="fleet", manifest=backbone_manifest)["root"]
        for position, name in enumerate(order):
            admin.create_capability(name=name, description=f"The {name} phase.", order=position)
        return cls(
            server.url,
            admin,
            RegistryClient(server.url, tokens["publisher"]),
            RegistryClient(server.url, tokens["approver"]),
            tokens,
            root,
            list(order),
        )

    def client(self, role: str, url: str | None = None, timeout: float = 30.0) -> RegistryClient:
        return RegistryClient(url or self.url, self.tokens[role], timeout=timeout)

    def publish(self, directory: Path, capability: str) -> dict[str, Any]:
        pushed = self.publisher.push_adapter(
            directory, capability=capability, backbone=self.backbone_root
        )
        adapter = dict(self.approver.approve(pushed["id"]))
        self.adapters[adapter["name"]] = adapter
        return adapter

    def promote(self, channel: str, adapters: Mapping[str, int | None]) -> int:
        result = self.approver.promote(
            channel, dict(adapters), backbone=self.backbone_root, order=self.order, create=True
        )
        return int(result["revision"]["revision"])

    def rollback(self, channel: str, to_revision: int) -> int:
        return int(self.approver.rollback(channel, to_revision=to_revision)["revision"])

    def revoke(self, adapter_id: int, reason: str = "fleet test") -> None:
        self.approver.revoke(adapter_id, reason)

    def head(self, channel: str) -> int:
        return int(self.admin.get_channel(channel)["revision"])

    def close(self) -> None:
        for client in (self.admin, self.publisher, self.approver):
            client.close()
