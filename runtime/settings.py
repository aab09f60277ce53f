"""Runtime node settings, read from ``WEACT_RUNTIME_*`` environment variables.

Command-line options override them; library code receives plain arguments.
"""

from __future__ import annotations

from functools import lru_cache

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class RuntimeSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="WEACT_RUNTIME_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(default=8100, ge=0, le=65535)
    # bearer tokens (separated by spaces), one required on every HTTP and MCP request
    token: SecretStr | None = None
    # admin tokens (separated by spaces): accepted like client tokens, and see every episode
    admin_token: SecretStr | None = None
    policy: str = "hard"
    order: str = "plan,search,write"
    max_steps: int = Field(default=16, gt=0)
    max_new_tokens: int = Field(default=256, gt=0)
    max_episodes: int = Field(default=64, gt=0)
    handle_idle_s: float = Field(default=900.0, gt=0)  # an unused MCP episode handle expires
    # vLLM engine: LoRA slots (versions resident at once, old and new during a swap) and the
    # largest rank a slot holds; unset, sized from the library given at start (a follower
    # starts empty: 8 slots of rank 64)
    vllm_max_loras: int | None = Field(default=None, gt=0)
    vllm_max_lora_rank: int | None = Field(default=None, gt=0)
    # vLLM engine: its KV cache in MiB; unset, vLLM's share of the GPU, or 512 MiB of host RAM
    # on CPU (~11,600 SmolLM2-135M tokens in fp32): concurrent episodes past that evict each
    # other's cached prefixes and rebuild them at every switch
    vllm_kv_cache_mib: int | None = Field(default=None, gt=0)


@lru_cache(maxsize=1)
def get_settings() -> RuntimeSettings:
    return RuntimeSettings()
