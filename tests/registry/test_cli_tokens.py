"""`weact token create` and `weact token list` on the database, on SQLite and PostgreSQL.

The list shows what `token create` wrote (id, name, role, created), oldest first, never a
secret or its hash; revoked tokens are left out; a database that is not there is one line
on stderr and exit 1, and nothing is created.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result
from sqlalchemy import select, update

from cli.main import app
from registry.db.models import SqlToken
from registry.db.session import session_scope


def weact(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def create(database_url: str, name: str, role: str) -> dict[str, Any]:
    done = weact(
        "token", "create", "--name", name, "--role", role, "--database-url", database_url, "--json"
    )
    assert done.exit_code == 0, done.output
    return dict(json.loads(done.stdout))


def test_list_shows_what_create_wrote_and_no_secret(database_url: str) -> None:
    principals = [("ops", "admin"), ("ci", "publisher"), ("ops", "reader")]
    made = [create(database_url, name, role) for name, role in principals]
    with session_scope(database_url) as session:
        hashes = list(session.scalars(select(SqlToken.token_hash)))
        revoke = update(SqlToken).where(SqlToken.id == made[1]["id"])
        session.execute(revoke.values(revoked_at=datetime.now()))

    listed = weact("token", "list", "--database-url", database_url, "--json")
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.stdout)
    assert [(r["id"], r["name"], r["role"]) for r in rows] == [
        (made[0]["id"], "ops", "admin"),
        (made[2]["id"], "ops", "reader"),
    ]
    assert all(set(r) == {"id", "name", "role", "created_at"} for r in rows)
    assert all(datetime.fromisoformat(r["created_at"]) for r in rows)
    table = weact("token", "list", "--database-url", database_url)
    assert table.exit_code == 0
    assert "admin" in table.stdout
    assert "reader" in table.stdout
    assert "publisher" not in table.stdout  # revoked
    for output in (listed.stdout, table.stdout):
        for secret in [m["token"] for m in made] + hashes:
            assert secret not in output


def test_list_of_a_database_that_is_not_there_creates_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'nowhere' / 'registry.db'}"
    done = weact("token", "list", "--database-url", url)
    assert done.exit_code == 1
    assert done.stderr.splitlines() == [
        f"Error: no registry database at {url} (give --database-url)"
    ]
    assert list(tmp_path.iterdir()) == []


def test_list_uses_the_default_database_of_the_working_directory(
    tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("WEACT_DATABASE_URL", raising=False)
    assert weact("token", "list").exit_code == 1  # nothing yet under ./.weact/
    created = weact("token", "create", "--name", "me", "--role", "admin")
    assert created.exit_code == 0
    assert (tmp_path / ".weact" / "registry.db").is_file()
    listed = weact("token", "list", "--json")
    assert [r["name"] for r in json.loads(listed.stdout)] == ["me"]
    assert "tokens in sqlite:///./.weact/registry.db" in weact("token", "list").stdout
