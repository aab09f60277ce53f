"""Registry settings, read from ``WEACT_*`` environment variables.

Entry points build one ``Settings()`` (``weact serve`` with its options over the
environment) and hand it to ``create_app``; library code receives plain arguments. The
client's registry URL is not a server setting: see ``clikit/options.py``
(``WEACT_URL``).
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="WEACT_", extra="ignore")

    database_url: str = "sqlite:///./.weact/registry.db"
    store_url: str = "./.weact/blobs"
    s3_endpoint_url: str | None = None
    # Request bodies: blob uploads up to max_body_bytes, every other (JSON) body up to
    # max_json_bytes; larger ones are 413 payload_too_large (registry.api.middleware).
    max_body_bytes: int = Field(default=2 * 1024**3, gt=0)
    max_json_bytes: int = Field(default=1024**2, gt=0)
    presign_threshold_bytes: int = Field(default=8 * 1024**2, ge=0)
    presign_expires_s: int = Field(default=3600, gt=0)
    long_poll_max_s: float = Field(default=60.0, gt=0)
    long_poll_interval_s: float = Field(default=0.5, gt=0)
    # In-process read caches (registry.services.read_cache): an entry lives at most this long
    # even if no write is heard of; 0 turns the cache off.
    channel_cache_ttl_s: float = Field(default=5.0, ge=0)
    token_cache_ttl_s: float = Field(default=1.0, ge=0)
    # Signed trust (registry.trust): the offline root of trust (a TUF root.json) and whether
    # the registry refuses pushes and approvals that lack a signature meeting it.
    trust_root: str | None = None
    strict: bool = False
