"""`clikit.progress`: when progress shows (a terminal stderr, or `WEACT_PROGRESS`), and
what it writes; only ever on stderr."""

from __future__ import annotations

import io
import re
import sys

import pytest

from clikit.progress import PROGRESS_ENV, progress_enabled, steps, transfer_progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("tty", "env", "shown"),
    [
        (True, None, True),
        (False, None, False),
        (False, "1", True),
        (False, "yes", True),
        (True, "0", False),
        (True, "off", False),
        (False, "", False),
    ],
)
def test_shown_on_a_terminal_or_when_forced(
    monkeypatch: pytest.MonkeyPatch, tty: bool, env: str | None, shown: bool
) -> None:
    monkeypatch.setattr(sys, "stderr", Terminal() if tty else io.StringIO())
    if env is None:
        monkeypatch.delenv(PROGRESS_ENV, raising=False)
    else:
        monkeypatch.setenv(PROGRESS_ENV, env)
    assert progress_enabled() is shown


def test_steps_are_lines_on_stderr(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(PROGRESS_ENV, "1")
    with steps("convert", 2) as step:
        step("load")
        step("save")
    out, err = capsys.readouterr()
    assert out == ""
    *lines, done = err.splitlines()
    assert lines == ["convert: step 1/2 load", "convert: step 2/2 save"]
    assert re.fullmatch(r"convert: done in \d+\.\d s", done)

    def broken() -> None:
        with steps("merge", 3) as step:
            step("read")
            raise ValueError("broken")

    with pytest.raises(ValueError, match="broken"):
        broken()
    assert capsys.readouterr().err == "merge: step 1/3 read\n"  # no "done" after a failure
    monkeypatch.setenv(PROGRESS_ENV, "0")
    with steps("convert", 1) as step:
        step("load")
    assert capsys.readouterr() == ("", "")


def test_a_forced_transfer_off_a_terminal_is_a_line_per_blob(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(PROGRESS_ENV, "1")
    with transfer_progress("push write") as progress:
        assert progress is not None
        for done in (4096, 8192, 10_000):
            progress(done, 10_000)
        progress(300, 300)
        progress(500, 0)  # a length the server did not announce: no line
    assert capsys.readouterr() == ("", "push write: 10.0 kB\npush write: 300 bytes\n")
    monkeypatch.delenv(PROGRESS_ENV)
    with transfer_progress("pull 3") as progress:
        assert progress is None  # not a terminal, not forced: nothing reports
