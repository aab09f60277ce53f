"""The vLLM registry plugin's rules, without vLLM: names, serve policy, what to drop,
the start-up refusal, settings."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runtime.vllm_resolver.names import ChannelName, VersionName, parse_name, squat_refusal
from runtime.vllm_resolver.policy import ServedName, deletable, names_to_drop, refusal
from runtime.vllm_resolver.settings import PluginSettings, api_key_refusal

WRITE1 = ServedName("write@1", "write@1", 1, "r1")
PROD_WRITE = ServedName("prod/write", "write@1", 1, "r1", "prod", "write", 4)
WRITE3 = ServedName("write@3", "write@3", 3, "r3")


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        ("write@7", VersionName("write", 7)),
        ("write++@12", VersionName("write++", 12)),
        ("prod/write", ChannelName("prod", "write")),
        ("my-model", None),
        ("write@", None),
        ("a/b/c", None),
        ("/abs/path", None),
    ],
)
def test_registry_names_parse(name: str, parsed: object) -> None:
    assert parse_name(name) == parsed
    if parsed is not None:
        assert str(parsed) == name


def test_load_lora_adapter_may_not_take_registry_names_or_library_paths(tmp_path: Path) -> None:
    library = tmp_path / "lib"
    (library / "write@1").mkdir(parents=True)
    elsewhere = tmp_path / "mine"
    assert "registry name" in str(squat_refusal("prod/write", str(elsewhere), library))
    assert "registry name" in str(squat_refusal("write@1", str(elsewhere), library))
    assert "inside" in str(squat_refusal("innocent", str(library / "write@1"), library))
    assert "inside" in str(
        squat_refusal("innocent", str(library / "x" / ".." / "write@1"), library)
    )
    assert squat_refusal("innocent", str(elsewhere), library) is None
    assert squat_refusal("innocent", "", library) is None  # vLLM answers 400 itself


@pytest.mark.parametrize(
    ("state", "mode", "by_channel", "served"),
    [
        ("approved", "no", False, True),
        ("approved", "no", True, True),
        ("candidate", "no", False, False),
        ("candidate", "evaluation", False, True),
        ("candidate", "evaluation", True, False),  # a channel name: approved heads only
        ("revoked", "evaluation", False, False),
        ("rejected", "evaluation", False, False),
        ("revoked", "no", True, False),
    ],
)
def test_serve_policy(state: str, mode: str, by_channel: bool, served: bool) -> None:
    why = refusal("write@3", state, mode, by_channel=by_channel)  # type: ignore[arg-type]
    assert (why is None) == served
    if state == "candidate" and not served and not by_channel:
        assert "WEACT_VLLM_SERVE_CANDIDATES=evaluation" in str(why)


def test_a_revoked_version_drops_its_version_and_channel_names() -> None:
    served = {"write@1": WRITE1, "prod/write": PROD_WRITE, "write@3": WRITE3}
    drop = names_to_drop(served, {1: "revoked", 3: "approved"}, {}, "no")
    assert drop == {"write@1": "write@1 is revoked", "prod/write": "write@1 is revoked"}


def test_a_moved_head_drops_only_the_channel_name() -> None:
    served = {"write@1": WRITE1, "prod/write": PROD_WRITE}
    moved = names_to_drop(served, {1: "approved"}, {("prod", "write"): "write@2"}, "no")
    assert set(moved) == {"prod/write"}
    assert "now serves write@2" in moved["prod/write"]
    gone = names_to_drop(served, {}, {("prod", "write"): None}, "no")
    assert "no longer serves 'write'" in gone["prod/write"]
    assert names_to_drop(served, {1: "approved"}, {("prod", "write"): "write@1"}, "no") == {}
    assert names_to_drop(served, {}, {("staging", "write"): "write@9"}, "no") == {}


def test_candidates_leave_when_evaluation_mode_is_off_or_they_are_rejected() -> None:
    served = {"write@3": WRITE3}
    assert names_to_drop(served, {3: "candidate"}, {}, "evaluation") == {}
    assert set(names_to_drop(served, {3: "candidate"}, {}, "no")) == {"write@3"}
    assert set(names_to_drop(served, {3: "rejected"}, {}, "evaluation")) == {"write@3"}


def test_files_of_revoked_and_rejected_versions_are_deletable() -> None:
    pulled = {1: "write@1", 2: "write@2", 3: "write@3"}
    states = {1: "revoked", 2: "approved", 3: "rejected"}
    assert deletable(states, pulled) == ["write@1", "write@3"]


def test_runtime_lora_updating_without_an_api_key_refuses_to_start() -> None:
    on = {"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "true"}
    why = api_key_refusal(on, ["api_server", "--model", "m"])
    assert why is not None
    assert "--api-key" in why
    assert "\n" not in why
    assert api_key_refusal(on, ["api_server", "--api-key", "k"]) is None
    assert api_key_refusal(on, ["api_server", "--api-key=k"]) is None
    assert api_key_refusal({**on, "VLLM_API_KEY": "k"}, ["api_server"]) is None
    assert api_key_refusal({}, ["api_server"]) is None


def test_settings_fall_back_to_the_cli_registry_and_default_to_no_candidates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in (
        "WEACT_VLLM_REGISTRY_URL",
        "WEACT_VLLM_REGISTRY_TOKEN",
        "WEACT_VLLM_SERVE_CANDIDATES",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WEACT_URL", "http://cli:8000")
    monkeypatch.setenv("WEACT_TOKEN", "cli-token")
    settings = PluginSettings()
    assert (settings.registry_url, settings.token()) == ("http://cli:8000", "cli-token")
    assert settings.serve_candidates == "no"
    monkeypatch.setenv("WEACT_VLLM_REGISTRY_URL", "http://own:8000")
    monkeypatch.setenv("WEACT_VLLM_SERVE_CANDIDATES", "evaluation")
    settings = PluginSettings()
    assert (settings.registry_url, settings.serve_candidates) == ("http://own:8000", "evaluation")
    monkeypatch.setenv("WEACT_VLLM_SERVE_CANDIDATES", "yes")
    with pytest.raises(ValueError, match="evaluation"):
        PluginSettings()


def test_the_plugin_refuses_the_server_start_once_and_only_where_it_matters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from runtime.vllm_resolver import CHECKED, register

    monkeypatch.delenv(CHECKED, raising=False)
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    monkeypatch.setenv("WEACT_VLLM_REGISTRY_URL", "http://registry:8000")
    monkeypatch.setattr("sys.argv", ["api_server", "--model", "m"])
    monkeypatch.setenv("VLLM_ALLOW_RUNTIME_LORA_UPDATING", "false")
    register()  # vLLM never asks resolvers then: the plugin does nothing, refuses nothing
    monkeypatch.setenv("VLLM_ALLOW_RUNTIME_LORA_UPDATING", "true")
    with pytest.raises(SystemExit, match="refusing to start.*--api-key"):
        register()
    assert CHECKED not in os.environ
