"""A mutation prints one confirmation line; the whole record with `-v`, JSON with `--json`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import factories
from test_cli_no_surprises import Cli, cli, seeded  # noqa: F401 (fixtures)


def lines(done: Any) -> list[str]:
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if line.strip()]


def test_mutations_print_one_line(cli: Cli, seeded: dict[str, Any], tmp_path: Path) -> None:  # noqa: F811
    alice, bob = seeded["tokens"]["publisher"], seeded["tokens"]["approver"]
    adapter = factories.write_adapter(tmp_path / "w2", seed=2)
    (pushed,) = lines(cli.run("adapter", "push", adapter, "--capability", "write", token=alice))
    assert pushed == "pushed write@2 (id 2, candidate)"
    assert lines(cli.run("adapter", "approve", "write@2", token=bob)) == [
        "approved write@2 (id 2, approved)"
    ]
    assert lines(cli.run("adapter", "tag", "write@2", "eval=ok", token=alice)) == [
        "write@2 tags: eval=ok"
    ]
    first = ("channel", "promote", "prod", "--create", "--adapter", "write=1")
    assert lines(cli.run(*first, token=bob))[0] == "promoted prod r1: write@1"
    promoted = lines(cli.run("channel", "promote", "prod", "--adapter", "write=2", token=bob))
    assert promoted[0] == "promoted prod r2: write@2"
    assert promoted[1].startswith("gate: passed")  # the gate's verdict and its report
    assert len(promoted) == 2
    rolled = lines(cli.run("channel", "rollback", "prod", "--to", "1", token=bob))
    assert rolled == ["rolled back to r1, as prod r3: write@1"]
    assert lines(cli.run("adapter", "revoke", "write@2", "--reason", "leaks", token=bob)) == [
        "revoked write@2 (id 2, revoked): leaks"
    ]
    # -v: the whole record, as `adapter show` prints it; --json: the record itself
    record = cli.run("adapter", "tag", "write@1", "k=v", "-v", token=alice)
    shown = lines(record)
    assert len(shown) > 5
    assert any(line.split()[:2] == ["name", "write@1"] for line in shown)
    assert json.loads(cli.run("adapter", "tag", "write@1", "j=1", "--json", token=alice).stdout)[
        "tags"
    ] == {"k": "v", "j": "1"}
