"""Registry settings, read from ``WEACT_*`` environment variables.

Entry points build one ``Settings()`` (``weact serve`` with its options over the
environment) and hand it to ``create_app``; library code receives plain arguments. The
client's registry URL is not a server setting: see ``registry/client/url_cli.py``
(``WEACT_URL``).
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from storage import HeaderLimits

ADAPTER_MAX_TENSORS = 16_384  # a LoRA of every linear module of an 80-layer model: ~1.1 k
ADAPTER_MAX_DIMS = 8  # LoRA tensors are 2-D (3-D for some MoE experts)
ADAPTER_MAX_ELEMENTS = 2**31
DEFAULT_ADAPTER_LIMITS = HeaderLimits(
    max_header_bytes=1024**2,
    max_tensors=ADAPTER_MAX_TENSORS,
    max_dims=ADAPTER_MAX_DIMS,
    max_elements=ADAPTER_MAX_ELEMENTS,
)
LIMIT_SETTINGS = {
    "max_header_bytes": "WEACT_ADAPTER_MAX_HEADER_BYTES",
    "max_tensors": "WEACT_ADAPTER_MAX_TENSORS",
    "max_dims": "WEACT_ADAPTER_MAX_DIMS",
    "max_elements": "WEACT_ADAPTER_MAX_ELEMENTS",
}
"""The setting (environment variable) behind each field of the adapter header limits."""


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
    # Slow clients (registry.api.timeouts): a request's line and headers must arrive within
    # header_timeout_s of its first byte (or of the connection), and a body may pause for
    # body_timeout_s at most between two pieces; else 408 and the connection is closed.
    header_timeout_s: float = Field(default=10.0, gt=0)
    body_timeout_s: float = Field(default=30.0, gt=0)
    # /v1/metrics answers a token of any role; true opens it to anyone (a scraper that
    # cannot send a bearer token, on a network that is trusted).
    metrics_public: bool = False
    # A write that waits longer than this for a database lock (SQLite's single writer,
    # PostgreSQL row and advisory locks) answers 503 `unavailable` with Retry-After.
    database_lock_timeout_s: float = Field(default=30.0, gt=0)
    # Adapter-sized bounds on an adapter's safetensors header, checked before any of it is
    # parsed or allocated (storage.HeaderLimits); a registration over one is refused with
    # 422 `incompatible_adapter` naming the limit and the setting that raises it.
    adapter_max_header_bytes: int = Field(default=DEFAULT_ADAPTER_LIMITS.max_header_bytes, gt=0)
    adapter_max_tensors: int = Field(default=ADAPTER_MAX_TENSORS, gt=0)
    adapter_max_dims: int = Field(default=ADAPTER_MAX_DIMS, gt=0)
    adapter_max_elements: int = Field(default=ADAPTER_MAX_ELEMENTS, gt=0)

    # Where a registry started without a root makes its development keys and root
    # (registry.trust.development).
    trust_dir: str = "./.weact/trust"
    # Signed trust (registry.trust): the offline root of trust (a TUF root.json) and whether
    # the registry refuses pushes and approvals that lack a signature meeting it.
    trust_root: str | None = None
    strict: bool = False
    # The online timestamp key (registry.trust.channel): it signs short-lived timestamps of
    # each channel's current revision. Default: timestamp.key beside the blob directory
    # (./.weact/), created when absent; its public half (timestamp.pub.json) goes in the
    # root as the timestamp role. A node whose root names it goes stale once the timestamp
    # it last saw expires, so a registry that stops publishing cannot go unnoticed.
    timestamp_key: str | None = None
    timestamp_expiry_s: float = Field(default=86_400.0, gt=0)

    def adapter_limits(self) -> HeaderLimits:
        return HeaderLimits(
            max_header_bytes=self.adapter_max_header_bytes,
            max_tensors=self.adapter_max_tensors,
            max_dims=self.adapter_max_dims,
            max_elements=self.adapter_max_elements,
        )
