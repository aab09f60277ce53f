"""bench/bench_scale.py's seeding cannot rot: a small registry seeded as the bench seeds it
(service layer, then bulk through the ORM models) is one the product reads as its own.

150 versions (10 through the service layer) and a 3-deep chain on SQLite: the version
count, a tag search, the chain's lineage, a clean `fsck` (blobs, roots, channel head, the
hash-chained events the bulk wrote) and a `gc` dry run that would delete exactly the
weights nobody registered.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from registry.db.session import Database
from registry.services import adapter_list, lineage
from registry.services.fsck import fsck
from registry.services.gc import collect_garbage
from storage import open_store

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from scale_seed import seed  # noqa: E402


def test_a_seeded_registry_reads_and_checks_clean(tmp_path: Path, sqlite_template: Path) -> None:
    path = tmp_path / "registry.db"
    shutil.copyfile(sqlite_template, path)
    db, store = Database(f"sqlite:///{path}"), open_store(str(tmp_path / "blobs"))
    try:
        seeded = seed(db, store, tmp_path / "files", 150, 3, service=10, spare=2)
        with db.read() as session:
            assert adapter_list.list_adapters(session=session, limit=1).total == 153
            tagged = adapter_list.list_adapters(session=session, tags=["team=t3"], limit=1000)
            assert tagged.total == len(range(3, 150, 12))  # no chain version is team t3
            found = lineage.lineage(session=session, adapter_id=seeded.chain_tip)
            assert len(found.ancestors) == 2
            report = fsck(session=session, store=store)
        assert report.ok, report.findings
        assert report.checked["adapters"] == 153
        assert report.checked["events"] >= 153
        unused = {files["adapter_model.safetensors"] for files in seeded.spare}
        garbage = collect_garbage(database=db, store=store, grace_s=0, dry_run=True)
        assert set(garbage.blobs) == unused
    finally:
        db.dispose()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from registry.db.migrate import upgrade

    path = tmp_path_factory.mktemp("bench-scale") / "registry.db"
    upgrade(f"sqlite:///{path}")
    return path
