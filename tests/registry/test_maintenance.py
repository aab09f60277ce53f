"""`weact fsck` finds every kind of inconsistency; `weact gc` deletes only what nobody can
claim; migration 0002 turns existing token names into principals, 0013 counts the versions
already there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from harness import Harness, World
from sqlalchemy import Connection, create_engine, select, text, update

from registry.db.migrate import upgrade
from registry.db.models import SqlAdapterVersion, SqlBlobLease, SqlEvent, utcnow
from registry.services.fsck import FsckReport, fsck
from registry.services.gc import collect_garbage
from storage import LocalBlobStore

WEACT = Path(sys.executable).with_name("weact")
DAY = 24 * 3600.0


def _fsck(api: Harness) -> FsckReport:
    with api.db.read() as session:
        return fsck(session=session, store=api.store)


def _age(store: LocalBlobStore, digest: str, seconds: float) -> None:
    path = store.path_of(digest)
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_fsck_is_clean_then_names_each_problem(world: World) -> None:
    api = world.api
    write = world.approved("write", seed=1)
    plan = world.approved("plan", seed=2)
    world.promote({"write": write["id"], "plan": plan["id"]})
    assert _fsck(api).ok
    assert _fsck(api).checked["channels"] == 1

    store: LocalBlobStore = api.store  # type: ignore[assignment]
    config = write["files"]["adapter_config.json"]
    store.delete(config)
    weights = plan["files"]["adapter_model.safetensors"]
    path = store.path_of(weights)
    path.chmod(0o644)
    path.write_bytes(path.read_bytes()[:-1] + b"\x01")
    with api.db.write() as session:  # what no service would do: a revoked adapter served
        second = session.scalar(select(SqlEvent.id).order_by(SqlEvent.id).offset(1).limit(1))
        session.execute(
            update(SqlAdapterVersion)
            .where(SqlAdapterVersion.id == write["id"])
            .values(state="revoked", manifest_root="f" * 64)
        )
        session.execute(update(SqlEvent).where(SqlEvent.id == second).values(payload="{}"))

    found = {(f.check, f.subject.split(" ")[0]): f.detail for f in _fsck(api).findings}
    assert "missing" in found[("blob", config)]
    assert "corrupted" in found[("blob", weights)]
    assert "not " + "f" * 64 in found[("adapter", "write@1")]
    assert "write is revoked" in found[("channel", "prod")]
    assert found[("events", "event")].startswith(f"event {second}:")
    assert found[("counts", "write")] == "counted 0, the versions say 1"  # write revoked


def test_weact_fsck_exits_1_on_a_finding_and_0_when_clean(
    sqlite_world: World, tmp_path: Path
) -> None:
    api = sqlite_world.api
    adapter = sqlite_world.approved("write", seed=1)
    url = str(api.db.url)
    store = str(api.store.root)  # type: ignore[attr-defined]
    env = {**os.environ, "COLUMNS": "200"}
    args = [str(WEACT), "fsck", "--database-url", url, "--store", store]
    clean = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)
    assert clean.returncode == 0, clean.stderr
    assert clean.stdout.startswith("clean: checked")
    api.store.delete(adapter["files"]["adapter_model.safetensors"])
    table = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)
    assert table.returncode == 1
    assert "missing from the store" in table.stdout
    as_json = subprocess.run([*args, "--json"], capture_output=True, text=True, env=env)
    assert as_json.returncode == 1
    report = json.loads(as_json.stdout)
    assert report["ok"] is False
    assert [f["check"] for f in report["findings"]] == ["blob"]


def test_gc_deletes_only_old_unreferenced_unleased_blobs(world: World) -> None:
    api = world.api
    store: LocalBlobStore = api.store  # type: ignore[assignment]
    adapter = world.approved("write", seed=1)
    world.promote({"write": adapter["id"]})
    stray = api.put_blob(b"nobody references me")
    fresh = api.put_blob(b"uploaded, about to be registered")
    re_put = api.put_blob(b"old, but PUT again just now")
    for digest in (stray, re_put, *adapter["files"].values()):
        _age(store, digest, 2 * DAY)
    with api.db.write() as session:  # the stray's last PUT was two days ago too
        session.execute(
            update(SqlBlobLease)
            .where(SqlBlobLease.digest == stray)
            .values(put_at=utcnow() - timedelta(days=2))
        )
    stale_tmp = store.root / ".tmp" / "put-crashed"
    stale_tmp.write_bytes(b"half a blob")
    os.utime(stale_tmp, (time.time() - 2 * DAY,) * 2)
    live_tmp = store.root / ".tmp" / "put-in-progress"
    live_tmp.write_bytes(b"an upload right now")

    dry = collect_garbage(database=api.db, store=store, grace_s=DAY, dry_run=True)
    assert (dry.blobs, dry.temp) == ([stray], ["put-crashed"])
    assert store.exists(stray)
    assert stale_tmp.exists()

    done = collect_garbage(database=api.db, store=store, grace_s=DAY)
    assert (done.blobs, done.temp) == ([stray], ["put-crashed"])
    assert done.blob_bytes == len(b"nobody references me")
    assert not store.exists(stray)
    assert not stale_tmp.exists()
    assert live_tmp.exists()
    assert all(store.exists(d) for d in (fresh, re_put, *adapter["files"].values()))
    # referenced among the old: the adapter's 2 files; recent: the backbone manifest and
    # `fresh` by their age, `re_put` by its lease
    assert (done.kept_referenced, done.kept_recent) == (2, 3)
    assert _fsck(api).ok


def test_a_registration_after_gc_took_its_blob_is_told_to_upload_again(world: World) -> None:
    api = world.api
    files = api.upload_adapter(seed=5)
    gone = collect_garbage(database=api.db, store=api.store, grace_s=0)
    assert set(files.values()) <= set(gone.blobs)
    body = api.adapter_body("write", world.backbone, files=files)
    assert "upload it first" in api.fails(404, "not_found", "POST", "/adapters", "publisher",
                                          json=body)  # fmt: skip
    files = api.upload_adapter(seed=5)  # PUT again, then register
    assert api.ok("POST", "/adapters", "publisher", json=body)["name"] == "write@1"
    assert _fsck(api).ok


def test_gc_refuses_a_negative_grace(sqlite_api: Harness) -> None:
    with pytest.raises(ValueError, match="negative"):
        collect_garbage(database=sqlite_api.db, store=sqlite_api.store, grace_s=-1)


def _old_versions(
    conn: Connection, capabilities: list[str], versions: list[tuple[int, int, str]]
) -> None:
    """Capabilities, backbone `b` and versions (capability id, version, state) written as an
    older schema holds them, before a migration under test."""
    now = "2026-01-01 00:00:00"
    for name in capabilities:
        conn.execute(text("INSERT INTO capabilities (name, description, created_at) "
                          "VALUES (:n, '', :t)"), {"n": name, "t": now})  # fmt: skip
    backbone = ("INSERT INTO backbones (name, root, tensor_count, param_count, "
                "manifest_digest, created_by, created_at) "
                "VALUES ('b', :d, 1, 1, :d, 'root', :t)")  # fmt: skip
    conn.execute(text(backbone), {"d": "a" * 64, "t": now})
    for capability, version, state in versions:
        conn.execute(text(
            "INSERT INTO adapter_versions (capability_id, backbone_id, version, state, rank, "
            "alpha, target_modules, files, manifest_root, provenance, created_by, created_at) "
            "VALUES (:c, 1, :v, :s, 4, 8, '[]', '{}', :d, '{}', 'alice', :t)"
        ), {"c": capability, "v": version, "s": state, "d": "b" * 64, "t": now})  # fmt: skip


def test_migration_0002_makes_principals_of_token_names(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    upgrade(url, "0001")
    engine = create_engine(url)
    now = "2026-01-01 00:00:00"
    with engine.begin() as conn:
        for i, (name, role) in enumerate([("alice", "publisher"), ("alice", "approver"),
                                          ("bob", "approver")]):  # fmt: skip
            conn.execute(
                text(
                    "INSERT INTO tokens (name, role, token_hash, created_at) "
                    "VALUES (:n, :r, :h, :t)"
                ),  # fmt: skip
                {"n": name, "r": role, "h": f"{i:064d}", "t": now},
            )
        _old_versions(conn, ["write"], [(1, 1, "candidate")])
    upgrade(url)
    with engine.connect() as conn:
        principals = dict(conn.execute(text("SELECT name, id FROM principals")).all())
        tokens = conn.execute(text("SELECT name, principal_id FROM tokens ORDER BY id")).all()
        creator = conn.execute(text("SELECT created_by_id FROM adapter_versions")).scalar()
    engine.dispose()
    assert set(principals) == {"alice", "bob"}
    assert [(n, p) for n, p in tokens] == [
        ("alice", principals["alice"]),
        ("alice", principals["alice"]),
        ("bob", principals["bob"]),
    ]
    assert creator == principals["alice"]


def test_migration_0013_counts_the_versions_already_there(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    upgrade(url, "0012")
    engine = create_engine(url)
    with engine.begin() as conn:
        versions = [(1, 1, "approved"), (2, 1, "candidate"), (2, 2, "candidate"),
                    (2, 3, "revoked")]  # fmt: skip
        _old_versions(conn, ["plan", "write"], versions)
    upgrade(url)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT capability_id, state, count FROM version_counts"))
        counts = sorted(tuple(r) for r in rows)
    engine.dispose()
    assert counts == [(1, "approved", 1), (2, "candidate", 2), (2, "revoked", 1)]
