"""A write acknowledged just before a SIGKILL survives the restart (issue 25).

A real `weact serve` answers a register, an approve and a promote with 2xx; the test kills
it (SIGKILL) the moment each answer arrives, starts a new server on the same database and
blob store, and finds the write there; at the end `weact fsck` is clean and the audit chain
verifies. On SQLite (WAL, synchronous=NORMAL: a commit survives a process crash) and on
PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness import Harness, make_tokens, make_world
from test_crash import fsck_clean

from registry.db.session import Database
from registry.launcher import EmbeddedRegistry, embedded_registry
from storage import open_store


@contextmanager
def life(workdir: Path, database_url: str, store_url: str, tokens: dict[str, str]
         ) -> Iterator[tuple[EmbeddedRegistry, Harness]]:  # fmt: skip
    """One server life: a Harness over HTTP with the tokens made in the first."""
    workdir.mkdir(parents=True, exist_ok=True)
    db = Database(database_url)
    with embedded_registry(workdir, database_url, store_url) as server:
        client = httpx.Client(base_url=server.url, timeout=60)
        try:
            api = Harness(client, db, open_store(store_url), workdir, tokens)  # type: ignore[arg-type]
            yield server, api
        finally:
            client.close()
            db.dispose()


def acknowledged_then_killed(
    server: EmbeddedRegistry, api: Harness, who: str, path: str, body: dict[str, Any]
) -> dict[str, Any]:
    """POST one write as ``who``; SIGKILL the server as soon as its 2xx is in."""
    response = api.request("POST", path, who, json=body)
    server.process.kill()
    server.process.wait()
    assert response.status_code in (200, 201), response.text
    return dict(response.json())


@pytest.mark.parametrize(
    "database_url",
    ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)],
    indirect=True,
)
def test_writes_acknowledged_before_a_sigkill_survive(database_url: str, tmp_path: Path) -> None:
    store = str(tmp_path / "blobs")
    db = Database(database_url)
    tokens = make_tokens(db)
    db.dispose()

    with life(tmp_path / "1", database_url, store, tokens) as (server, api):
        world = make_world(api)
        body = api.adapter_body("write", world.backbone, seed=1)
        registered = acknowledged_then_killed(server, api, "publisher", "/adapters", body)

    with life(tmp_path / "2", database_url, store, tokens) as (server, api):
        found = api.ok("GET", f"/adapters/{registered['id']}", "reader")
        assert (found["state"], found["files"]) == ("candidate", registered["files"])
        approved = acknowledged_then_killed(
            server, api, "approver", f"/adapters/{registered['id']}/approve", {"reason": "ok"}
        )
        assert approved["state"] == "approved"

    with life(tmp_path / "3", database_url, store, tokens) as (server, api):
        assert api.ok("GET", f"/adapters/{registered['id']}", "reader")["state"] == "approved"
        body = {"backbone": world.backbone, "adapters": {"write": registered["id"]}, "create": True}
        promoted = acknowledged_then_killed(server, api, "approver", "/channels/prod/promote", body)

    with life(tmp_path / "4", database_url, store, tokens) as (server, api):
        head = api.ok("GET", "/channels/prod", "reader")
        assert head["revision"] == promoted["revision"]["revision"]
        assert head["library"]["write"]["adapter_id"] == registered["id"]
        assert api.ok("GET", "/events/verify", "reader")["ok"]
        fsck_clean(server)
