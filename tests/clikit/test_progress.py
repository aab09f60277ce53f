"""`clikit.progress`: when progress shows (a terminal stderr, or `WEACT_PROGRESS`), and
what it writes; only ever on stderr."""

from __future__ import annotations

import io
import re
import sys

import pytest

from clikit.progress import PROGRESS_ENV, progress_enabled, steps, timing, transfer_progress


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
    assert re.fullmatch(r"convert: step 1/2 load \(\d+\.\d s\)", lines[0])
    assert re.fullmatch(r"convert: step 2/2 save \(\d+\.\d s, ETA \d+\.\d s\)", lines[1])
    assert re.fullmatch(r"convert: done in \d+\.\d s", done)

    def broken() -> None:
        with steps("merge", 3) as step:
            step("read")
            raise ValueError("broken")

    with pytest.raises(ValueError, match="broken"):
        broken()
    failed = capsys.readouterr().err  # no "done" after a failure
    assert re.fullmatch(r"merge: step 1/3 read \(\d+\.\d s\)\n", failed)
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


def test_timing_is_elapsed_then_the_mean_step_times_those_left(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = 1000.0
    monkeypatch.setattr("clikit.progress.time.monotonic", lambda: now)
    assert timing(now - 2.0, 0, 10) == "2.0 s"  # nothing done: no estimate yet
    assert timing(now - 2.0, 1, 5) == "2.0 s, ETA 8.0 s"
    assert timing(now - 90.0, 3, 4) == "1 min 30 s, ETA 30.0 s"
    assert timing(now - 3725.0, 1, 2) == "1 h 02 min, ETA 1 h 02 min"
    assert timing(now - 2.0, 3, None) == "2.0 s"  # total unknown
    assert timing(now - 2.0, 5, 5) == "2.0 s"  # done


def test_training_progress_shows_no_nan_and_has_elapsed_and_eta(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from trainers.cli import _progress

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    with _progress("train write") as on_step:
        first = terminal.getvalue()
        on_step(1, 4, 2.5)
        on_step(2, 4, 1.25)
    shown = terminal.getvalue()
    assert "nan" not in shown
    assert "loss -" in first or "loss -" in shown  # before the first step ends
    assert "loss 1.2500" in shown
    assert "ETA" in shown
    assert re.search(r"\d:\d\d:\d\d", shown)  # elapsed

    forced = io.StringIO()
    monkeypatch.setattr(sys, "stderr", forced)
    monkeypatch.setenv(PROGRESS_ENV, "1")
    with _progress("train write") as on_step:
        on_step(1, 4, 2.5)
    assert re.fullmatch(
        r"train write: step 1/4 loss 2\.5000 \(\d+\.\d s, ETA \d+\.\d s\)\n", forced.getvalue()
    )
