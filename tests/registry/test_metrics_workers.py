"""`/v1/metrics` under `weact serve --workers 2`: every worker's scrape counts every request.

Each request and scrape opens its own connection, so either worker may answer it; without
the shared counter files each scrape would show only the answering worker's requests.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from registry.launcher import embedded_registry

REQUESTS, SCRAPES = 30, 8
HEALTHZ = re.compile(
    r'^weact_http_requests_total\{method="GET",route="/v1/healthz",status="200"\} (\S+)$', re.M
)


def _healthz_count(url: str) -> float:
    text = httpx.get(f"{url}/v1/metrics", timeout=30).text
    found = HEALTHZ.search(text)
    return float(found.group(1)) if found else 0.0


def test_every_worker_reports_the_requests_of_all_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEACT_METRICS_PUBLIC", "true")  # scraped without a token
    with embedded_registry(tmp_path, workers=2) as server:
        before = _healthz_count(server.url)
        for _ in range(REQUESTS):
            assert httpx.get(f"{server.url}/v1/healthz", timeout=30).status_code == 200
        counts = {_healthz_count(server.url) for _ in range(SCRAPES)}
    assert counts == {before + REQUESTS}
