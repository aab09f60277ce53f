"""Debian's Chromium under Playwright, for tests that look at pages in a real browser.

`chromium_path()` finds `/usr/bin/chromium`, running `.ci/ensure-chromium` (apt-get, as root)
once when it is missing, and skips the test with the reason when it is still missing.
`launch_chromium(playwright)` starts it headless with the flags that work here as root;
Playwright gives every launch a fresh profile directory of its own. Never call
`playwright install`: its browser downloads cannot work offline.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ENSURE = Path(__file__).resolve().parents[2] / ".ci" / "ensure-chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> Path:
    """The Chromium binary; installs it once if possible, else skips the calling test."""
    if not CHROMIUM.exists() and ENSURE.exists():
        result = subprocess.run(
            ["bash", str(ENSURE)], capture_output=True, text=True, timeout=900, check=False
        )
        reason = result.stderr.strip()
    else:
        reason = f"{ENSURE} not found"
    if not CHROMIUM.exists():
        pytest.skip(f"no browser: {CHROMIUM} missing and not installable here ({reason})")
    return CHROMIUM


def launch_chromium(playwright: Any) -> Any:
    """A headless Chromium browser (Playwright `Browser`) on Debian's binary."""
    return playwright.chromium.launch(
        executable_path=str(chromium_path()), headless=True, args=FLAGS
    )
