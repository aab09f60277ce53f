"""Channel long-polls against a live registry, each in a thread of its own.

`poll_in_thread` opens `GET /v1/channels/prod?after=...&wait=...` on a connection of its
own (so any worker of a server may take it) and returns the thread with a list that gets
`(response, seconds waited)` when the poll answers. `wait_for_polls` waits until a server's
`weact_long_polls_waiting` gauge shows the polls open, so a test acts on them only then.
"""

from __future__ import annotations

import threading
import time

import httpx


def poll_in_thread(url: str, token: str, after: int, wait: float) -> tuple[threading.Thread, list]:
    out: list = []

    def run() -> None:
        start = time.monotonic()
        response = httpx.get(
            f"{url}/v1/channels/prod",
            params={"after": after, "wait": wait},
            headers={"Authorization": f"Bearer {token}"},
            timeout=wait + 30,
        )
        out.append((response, time.monotonic() - start))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def wait_for_polls(url: str, count: int, token: str, timeout: float = 30) -> None:
    """Until `count` long-polls are open in the server at `url` (one process: its gauge,
    scraped with `token`)."""
    deadline = time.monotonic() + timeout
    headers = {"Authorization": f"Bearer {token}"}
    while time.monotonic() < deadline:
        text = httpx.get(f"{url}/v1/metrics", headers=headers).text
        if f"weact_long_polls_waiting {float(count)}" in text:
            return
        time.sleep(0.05)
    raise AssertionError(f"{count} long-polls never opened on {url}")
