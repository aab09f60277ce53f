"""The registry as a LoRA source for stock vLLM servers: a vLLM `LoRAResolver` plugin.

With the plugin installed (this package, entry point `vllm.general_plugins:weact_registry`),
`WEACT_VLLM_REGISTRY_URL` set and `VLLM_ALLOW_RUNTIME_LORA_UPDATING=true`, a plain vLLM
OpenAI server of the backbone

    WEACT_VLLM_REGISTRY_URL=http://registry:8000 WEACT_VLLM_REGISTRY_TOKEN=... \\
    VLLM_ALLOW_RUNTIME_LORA_UPDATING=true \\
    python -m vllm.entrypoints.openai.api_server --model ./backbone --enable-lora ...

answers a request for `"model": "write@7"` (an adapter version) or `"model": "prod/write"`
(a channel's capability, resolved to the version the channel serves) by pulling that version
from the registry over HTTP (`registry.client`), checking every file against its blob digest
and the weights' manifest root against the registry's, checking that the adapter was trained
on the backbone this server serves, and only then handing the directory to vLLM. Anything
that fails verification is refused and logged; vLLM answers 404 for the name.

vLLM keeps a resolved name for the server's lifetime, so the LoRA is always registered
under its version name (vLLM keys its prefix cache by it): `prod/write` keeps serving the
version it first resolved to until the server unloads it (`POST /v1/unload_lora_adapter`),
after which the next request resolves the channel again. Revoked or rejected versions are
never served. Settings: `WEACT_VLLM_REGISTRY_URL`, `WEACT_VLLM_REGISTRY_TOKEN` (else
`WEACT_TOKEN`), `WEACT_VLLM_LIBRARY_DIR` (default `~/.cache/weact/vllm-lora`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from registry.client import Adapter, LibraryEntry, RegistryClient
from registry.errors import RegistryError
from runtime.sync import pull_entry

logger = logging.getLogger(__name__)

ENV_URL = "WEACT_VLLM_REGISTRY_URL"
ENV_TOKEN = "WEACT_VLLM_REGISTRY_TOKEN"
ENV_DIR = "WEACT_VLLM_LIBRARY_DIR"
RESOLVER_NAME = "WeAct registry"
VERSION_RE = re.compile(r"^(?P<capability>[A-Za-z0-9_.+-]+)@(?P<version>[0-9]+)$")
CHANNEL_RE = re.compile(r"^(?P<channel>[A-Za-z0-9_.-]+)/(?P<capability>[A-Za-z0-9_.+-]+)$")
SERVABLE = frozenset({"candidate", "approved"})
WEIGHTS_FILE = "adapter_model.safetensors"


class ResolveRefused(Exception):
    """A name this resolver owns but will not serve (not found, unverified, wrong backbone)."""


@dataclass(frozen=True)
class Resolved:
    name: str  # the version name, e.g. "write@7": what vLLM registers the LoRA under
    path: Path  # verified PEFT directory


class RegistrySource:
    """Pulls and verifies adapter versions named `capability@N` or `channel/capability`."""

    def __init__(self, client: RegistryClient, dest: Path) -> None:
        self.client = client
        self.dest = Path(dest)
        self._backbones: dict[str, str] = {}  # served model -> manifest root
        self._lock = threading.Lock()

    def owns(self, lora_name: str) -> bool:
        return bool(VERSION_RE.match(lora_name) or CHANNEL_RE.match(lora_name))

    def resolve(self, base_model: str, lora_name: str) -> Resolved:
        """The verified directory for `lora_name`; ResolveRefused with the reason otherwise."""
        entry = self._entry(lora_name)
        adapter = self.client.get_adapter(entry["adapter_id"])
        if adapter["state"] not in SERVABLE:
            raise ResolveRefused(f"{adapter['name']} is {adapter['state']}")
        self._check_backbone(base_model, adapter)
        with self._lock:  # one pull per directory at a time
            path = pull_entry(self.client, entry, self.dest)
        self._check_root(path, adapter)
        return Resolved(entry["name"], path)

    def _entry(self, lora_name: str) -> LibraryEntry:
        if m := CHANNEL_RE.match(lora_name):
            library = self.client.get_channel(m["channel"])["library"]
            if m["capability"] not in library:
                raise ResolveRefused(f"channel {m['channel']!r} has no {m['capability']!r}")
            return library[m["capability"]]
        if m := VERSION_RE.match(lora_name):
            adapter = self._find_version(m["capability"], int(m["version"]))
            return {
                "adapter_id": adapter["id"],
                "name": adapter["name"],
                "manifest_root": adapter["manifest_root"],
                "files": adapter["files"],
            }
        raise ResolveRefused(f"{lora_name!r} is neither capability@version nor channel/capability")

    def _find_version(self, capability: str, version: int) -> Adapter:
        offset = 0
        while True:
            page = self.client.list_adapters(capability=capability, limit=100, offset=offset)
            for adapter in page["items"]:
                if adapter["version"] == version:
                    return adapter
            offset += len(page["items"])
            if not page["items"] or offset >= page["total"]:
                raise ResolveRefused(f"no adapter {capability}@{version} in the registry")

    def _check_backbone(self, base_model: str, adapter: Adapter) -> None:
        """The adapter must have been trained on the weights this server serves."""
        from storage.manifest import manifest_of_path

        if not Path(base_model).is_dir():  # a hub name: nothing local to compare
            logger.warning(
                "cannot check the backbone of %s against %r", adapter["name"], base_model
            )
            return
        if base_model not in self._backbones:
            self._backbones[base_model] = manifest_of_path(Path(base_model)).root
        if self._backbones[base_model] != adapter["backbone"]:
            raise ResolveRefused(
                f"{adapter['name']} was trained on backbone {adapter['backbone']}, this server "
                f"serves {self._backbones[base_model]}"
            )

    @staticmethod
    def _check_root(path: Path, adapter: Adapter) -> None:
        from storage.manifest import manifest_of_file

        root = manifest_of_file(path / WEIGHTS_FILE).root
        if root != adapter["manifest_root"]:
            raise ResolveRefused(
                f"{adapter['name']}: manifest root {root} != registry's {adapter['manifest_root']}"
            )


def make_resolver(source: RegistrySource) -> Any:
    """A vLLM `LoRAResolver` over `source` (vLLM imported here, on use)."""
    from vllm.lora.request import LoRARequest
    from vllm.lora.resolver import LoRAResolver

    class RegistryLoRAResolver(LoRAResolver):  # type: ignore[misc]
        async def resolve_lora(self, base_model_name: str, lora_name: str) -> Any:
            if not source.owns(lora_name):
                return None
            try:
                got = await asyncio.to_thread(source.resolve, base_model_name, lora_name)
            except (ResolveRefused, RegistryError, httpx.HTTPError, OSError) as exc:
                logger.error("refusing LoRA %r from the registry: %s", lora_name, exc)
                return None
            logger.info("LoRA %r resolved to %s, verified, at %s", lora_name, got.name, got.path)
            # vLLM replaces the integer id with its own counter
            return LoRARequest(lora_name=got.name, lora_int_id=1, lora_path=str(got.path))

    return RegistryLoRAResolver()


def register() -> None:
    """vLLM general-plugin entry point: registers the resolver when configured."""
    url = os.environ.get(ENV_URL)
    if not url:
        return
    from vllm.lora.resolver import LoRAResolverRegistry

    token = os.environ.get(ENV_TOKEN) or os.environ.get("WEACT_TOKEN")
    dest = Path(os.environ.get(ENV_DIR) or Path.home() / ".cache" / "weact" / "vllm-lora")
    source = RegistrySource(RegistryClient(url, token), dest)
    LoRAResolverRegistry.register_resolver(RESOLVER_NAME, make_resolver(source))
