"""`stdout_to_stderr`: whatever writes to stdout meanwhile (Python, file descriptor 1, a
child process) lands on stderr; stdout afterwards holds only the result."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = """
import json, logging, os, subprocess, sys
from clikit.output import stdout_to_stderr

logging.basicConfig(stream=sys.stdout, level=logging.INFO)  # a handler on stdout, as vLLM's
with stdout_to_stderr():
    print("a print")
    logging.getLogger("engine").info("a log line")
    os.write(1, b"raw fd 1\\n")
    subprocess.run([sys.executable, "-c", "print('a child process')"], check=True)
print(json.dumps({"ok": True}))
"""


def test_stdout_holds_only_the_result() -> None:
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": ""},
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"ok": True}
    for line in ("a print", "INFO:engine:a log line", "raw fd 1", "a child process"):
        assert line in done.stderr
