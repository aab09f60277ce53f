"""Pull and verify the versions behind registry names, under the serve policy.

`RegistrySource.resolve` turns `write@7` or `prod/write` into a verified PEFT directory
`library_dir/write@7/` (every file against its blob digest, the weights' manifest root
against the registry's, the adapter's backbone against the served one) and a `ServedName`
binding; a name the policy does not serve, or anything that fails verification, is
`ResolveRefused`.
"""

from __future__ import annotations

import threading
from pathlib import Path

from registry.client import Adapter, LibraryEntry, RegistryClient
from runtime.sync import pull_entry
from runtime.vllm_resolver.log import get_logger
from runtime.vllm_resolver.names import ChannelName, VersionName, parse_name
from runtime.vllm_resolver.policy import CandidateMode, ServedName, refusal

logger = get_logger(__name__)
WEIGHTS_FILE = "adapter_model.safetensors"


class ResolveRefused(Exception):
    """A name this resolver owns but will not serve (not found, unverified, wrong backbone)."""


def entry_of(adapter: Adapter) -> LibraryEntry:
    return {
        "adapter_id": adapter["id"],
        "name": adapter["name"],
        "manifest_root": adapter["manifest_root"],
        "files": adapter["files"],
    }


def find_version(client: RegistryClient, capability: str, version: int) -> Adapter:
    offset = 0
    while True:
        page = client.list_adapters(capability=capability, limit=100, offset=offset)
        for adapter in page["items"]:
            if adapter["version"] == version:
                return adapter
        offset += len(page["items"])
        if not page["items"] or offset >= page["total"]:
            raise ResolveRefused(f"no adapter {capability}@{version} in the registry")


class RegistrySource:
    """Resolves registry names for one served backbone into verified directories."""

    def __init__(self, client: RegistryClient, dest: Path, mode: CandidateMode = "no") -> None:
        self.client = client
        self.dest = Path(dest)
        self.mode = mode
        self._backbones: dict[str, str] = {}  # served model -> manifest root
        self._lock = threading.Lock()

    def owns(self, lora_name: str) -> bool:
        return parse_name(lora_name) is not None

    def resolve(self, base_model: str, lora_name: str) -> tuple[ServedName, Path]:
        """The binding and verified directory for `lora_name`; ResolveRefused otherwise."""
        parsed = parse_name(lora_name)
        if isinstance(parsed, ChannelName):
            binding, adapter = self._channel_head(lora_name, parsed)
        elif isinstance(parsed, VersionName):
            adapter = find_version(self.client, parsed.capability, parsed.version)
            binding = ServedName(
                lora_name, adapter["name"], adapter["id"], adapter["manifest_root"]
            )
        else:
            raise ResolveRefused(f"{lora_name!r} is neither capability@N nor channel/capability")
        if why := refusal(
            adapter["name"], adapter["state"], self.mode, by_channel=binding.channel is not None
        ):
            raise ResolveRefused(why)
        self._check_backbone(base_model, adapter)
        with self._lock:  # one pull per directory at a time
            path = pull_entry(self.client, entry_of(adapter), self.dest)
        self._check_root(path, adapter)
        return binding, path

    def _channel_head(self, lora_name: str, parsed: ChannelName) -> tuple[ServedName, Adapter]:
        revision = self.client.get_channel(parsed.channel)
        entry = revision["library"].get(parsed.capability)
        if entry is None:
            raise ResolveRefused(f"channel {parsed.channel!r} has no {parsed.capability!r}")
        adapter = self.client.get_adapter(entry["adapter_id"])
        binding = ServedName(
            lora_name, adapter["name"], adapter["id"], adapter["manifest_root"],
            channel=parsed.channel, capability=parsed.capability,
            revision=int(revision["revision"]),
        )  # fmt: skip
        return binding, adapter

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
