"""Header bombs against a real `weact serve` on its defaults (issue 25): each is refused in
under a second, naming the limit and the setting, and the server's resident set (VmHWM,
the peak, from /proc) grows by less than 50 MB over the upload and the registration.

The three shapes of the report: 1.65 M zero-size tensors (a ~94 MiB header), one shape of
33 M dimensions (a ~63 MiB header) and a 94 MiB header (padding). Before the fix the first
took 64-110 s and grew the server to 1.6 GB.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from bombs import MIB, many_dims, padded_header, reset_peak, rss_kib, zero_size_tensors
from harness import make_world
from live import live_harness

from registry.launcher import embedded_registry

MAX_S = 1.0
MAX_GROWTH_KIB = 50 * 1000  # 50 MB

BOMBS: dict[str, tuple[Callable[[], bytes], str]] = {
    "1.65M-zero-size-tensors": (lambda: zero_size_tensors(1_650_000), "max_header_bytes"),
    "33M-dimension-shape": (lambda: many_dims(33_000_000), "max_header_bytes"),
    "94MiB-header": (lambda: padded_header(94 * MIB), "max_header_bytes"),
}


def test_header_bombs_are_refused_fast_and_cost_no_memory(tmp_path: Path) -> None:
    with embedded_registry(tmp_path) as server, live_harness(server, tmp_path) as api:
        pid = server.process.pid
        world = make_world(api)
        world.adapter("write", seed=1)  # warm: the code paths of a registration are loaded
        config = api.upload_adapter(seed=2)["adapter_config.json"]
        figures = []
        for name, (build, limit) in BOMBS.items():
            bomb = build()
            reset_peak(pid)
            before = rss_kib(pid)
            files = {"adapter_config.json": config, "adapter_model.safetensors": api.put_blob(bomb)}
            body = api.adapter_body("plan", world.backbone, files=files)
            started = time.monotonic()
            response = api.request("POST", "/adapters", "publisher", json=body)
            took = time.monotonic() - started
            growth = rss_kib(pid, "VmHWM") - before
            figures.append(f"{name}: {len(bomb) / MIB:.1f} MiB file, refused in {took:.3f} s, "
                           f"peak RSS +{growth / 1000:.1f} MB")  # fmt: skip
            assert response.status_code == 422, response.text
            detail = response.json()["detail"]
            assert detail["limit"] == limit, detail
            assert detail["setting"] == "WEACT_ADAPTER_MAX_HEADER_BYTES"
            assert "WEACT_ADAPTER_MAX_HEADER_BYTES" in detail["message"]
            assert took < MAX_S, figures[-1]
            assert growth < MAX_GROWTH_KIB, figures[-1]
            del bomb
        print("\n".join(figures))  # noqa: T201 - the figures are the point of this test
        assert api.ok("GET", "/healthz", None) == {"status": "ok"}


@pytest.mark.parametrize(
    ("env", "bomb", "limit"),
    [
        ({"WEACT_ADAPTER_MAX_TENSORS": "1000"}, lambda: zero_size_tensors(5000), "max_tensors"),
        ({"WEACT_ADAPTER_MAX_DIMS": "4"}, lambda: many_dims(5), "max_dims"),
    ],
)
def test_a_refusal_names_the_setting_that_raises_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    bomb: Callable[[], bytes],
    limit: str,
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with embedded_registry(tmp_path) as server, live_harness(server, tmp_path) as api:
        world = make_world(api)
        files = api.upload_adapter(seed=2)
        files["adapter_model.safetensors"] = api.put_blob(bomb())
        body = api.adapter_body("plan", world.backbone, files=files)
        detail = api.fails(422, "incompatible_adapter", "POST", "/adapters", "publisher", json=body)
        setting = next(iter(env))
        assert (detail["limit"], detail["setting"], detail["bound"]) == (
            limit,
            setting,
            int(env[setting]),
        )
        assert setting in detail["message"]
