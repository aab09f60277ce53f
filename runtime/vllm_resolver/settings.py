"""The plugin's settings, from `WEACT_VLLM_*` environment variables (every vLLM process of
the server reads the same ones: the API server resolves and follows, the engine verifies).
"""

from __future__ import annotations

import socket
from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from registry.errors import RegistryError
from registry.trust import TrustRoot
from runtime.vllm_resolver.policy import CandidateMode

TRUE = frozenset({"1", "true", "yes", "on"})


class PluginSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="WEACT_VLLM_", extra="ignore")

    # the registry; `WEACT_URL` / `WEACT_TOKEN` (the CLI's) when the plugin's own are unset
    registry_url: str | None = Field(
        default=None, validation_alias=AliasChoices("WEACT_VLLM_REGISTRY_URL", "WEACT_URL")
    )
    # a `node` token: reads adapters and channels, heartbeats, reports refused loads
    registry_token: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("WEACT_VLLM_REGISTRY_TOKEN", "WEACT_TOKEN")
    )
    library_dir: Path = Path.home() / ".cache" / "weact" / "vllm-lora"
    # "evaluation": candidates are served by version name (evaluator runs); default "no"
    serve_candidates: CandidateMode = "no"
    node_id: str = Field(default_factory=lambda: f"vllm-{socket.gethostname()}"[:64])
    check_s: float = Field(default=1.0, gt=0)  # state check of versions served by name
    wait_s: float = Field(default=30.0, gt=0)  # long-poll of the channels served
    heartbeat_s: float = Field(default=10.0, gt=0)
    # the channel a heartbeat names when the server serves no channel name (or several);
    # with a root, the one channel served, whose approvers every version must carry
    channel: str = "prod"
    # the root of trust (`root.json`, what nodes take as `--root`): serve only what its keys
    # signed (`trust.py`); `WEACT_ROOT` when the plugin's own is unset; none: as the registry says
    root: Path | None = Field(
        default=None, validation_alias=AliasChoices("WEACT_VLLM_ROOT", "WEACT_ROOT")
    )

    def token(self) -> str | None:
        return self.registry_token.get_secret_value() if self.registry_token else None

    def trust_root(self) -> TrustRoot | None:
        """The root of trust, verified (its admin threshold signed it, not expired); a clear
        `SystemExit` when it is set but unusable: the server must not start trusting all."""
        if self.root is None:
            return None
        try:
            return TrustRoot.load(self.root)
        except (RegistryError, OSError) as exc:
            raise SystemExit(
                f"weact registry plugin: refusing to start: root of trust {self.root} "
                f"(WEACT_ROOT): {exc}"
            ) from exc


def api_key_refusal(environ: Mapping[str, str], argv: Sequence[str]) -> str | None:
    """One line when the server would open `/v1/load_lora_adapter` to anyone, else None.

    The resolver needs `VLLM_ALLOW_RUNTIME_LORA_UPDATING=true`, which also opens vLLM's
    load/unload endpoints; only `--api-key` (or `VLLM_API_KEY`) puts them behind a key.
    """
    if environ.get("VLLM_ALLOW_RUNTIME_LORA_UPDATING", "").lower() not in TRUE:
        return None
    if environ.get("VLLM_API_KEY") or any(
        arg == "--api-key" or arg.startswith("--api-key=") for arg in argv
    ):
        return None
    return (
        "weact registry plugin: refusing to start: VLLM_ALLOW_RUNTIME_LORA_UPDATING=true "
        "opens /v1/load_lora_adapter to anyone; start the server with --api-key KEY"
    )
