"""Pull and verify the versions behind registry names, under the serve policy.

`RegistrySource.resolve` turns `write@7` or `prod/write` into a verified PEFT directory
`library_dir/write@7/` (every file against its blob digest, the weights' manifest root
against the registry's, the adapter's backbone against the served one) and a `ServedName`
binding; a name the policy does not serve, or anything that fails verification, is
`ResolveRefused`. With a root of trust (`trust.Trust`, `WEACT_ROOT`) a channel name
resolves in the channel's last revision the root's keys signed, a version name only when
its keys signed it, and the pull is of the signed entry.
"""

from __future__ import annotations

import threading
from pathlib import Path

from registry.client import Adapter, LibraryEntry, RegistryClient
from registry.errors import UntrustedError
from runtime.sync import pull_entry
from runtime.vllm_resolver.log import get_logger
from runtime.vllm_resolver.names import ChannelName, VersionName, parse_name
from runtime.vllm_resolver.policy import CandidateMode, ServedName, refusal
from runtime.vllm_resolver.trust import Trust, entry_of

__all__ = ["RegistrySource", "ResolveRefused", "entry_of", "find_version"]

logger = get_logger(__name__)
WEIGHTS_FILE = "adapter_model.safetensors"


class ResolveRefused(Exception):
    """A name this resolver owns but will not serve (not found, unverified, wrong backbone)."""


def find_version(client: RegistryClient, capability: str, version: int) -> Adapter:
    """The version `capability@version`, its capability's pages walked by key (`after`: an
    offset stops at 10,000 and reads what it skips)."""
    after: int | None = None
    while True:
        page = client.list_adapters(capability=capability, limit=100, after=after)
        for adapter in page["items"]:
            if adapter["version"] == version:
                return adapter
        if not page["items"]:
            raise ResolveRefused(f"no adapter {capability}@{version} in the registry")
        after = page["items"][-1]["id"]


class RegistrySource:
    """Resolves registry names for one served backbone into verified directories."""

    def __init__(
        self,
        client: RegistryClient,
        dest: Path,
        mode: CandidateMode = "no",
        trust: Trust | None = None,
    ) -> None:
        self.client = client
        self.dest = Path(dest)
        self.mode = mode
        self.trust = trust or Trust(lambda: client, None)
        self._backbones: dict[str, str] = {}  # served model -> manifest root
        self._lock = threading.Lock()

    def owns(self, lora_name: str) -> bool:
        return parse_name(lora_name) is not None

    def resolve(self, base_model: str, lora_name: str) -> tuple[ServedName, Path]:
        """The binding and verified directory for `lora_name`; ResolveRefused otherwise."""
        parsed = parse_name(lora_name)
        if isinstance(parsed, ChannelName):
            binding, adapter, entry, backbone = self._channel_head(lora_name, parsed)
        elif isinstance(parsed, VersionName):
            adapter = find_version(self.client, parsed.capability, parsed.version)
            entry, backbone = None, adapter["backbone"]
            binding = ServedName(
                lora_name, adapter["name"], adapter["id"], adapter["manifest_root"]
            )
        else:
            raise ResolveRefused(f"{lora_name!r} is neither capability@N nor channel/capability")
        if why := refusal(
            adapter["name"], adapter["state"], self.mode, by_channel=binding.channel is not None
        ):
            raise ResolveRefused(why)
        if entry is None:  # a version name: signed as the root requires (no root: as stored)
            try:
                entry = self.trust.version(adapter)
            except UntrustedError as exc:
                raise ResolveRefused(str(exc)) from exc
        self._check_backbone(base_model, adapter["name"], backbone)
        with self._lock:  # one pull per directory at a time
            path = pull_entry(self.client, entry, self.dest)
        self._check_root(path, entry)
        return binding, path

    def _channel_head(
        self, lora_name: str, parsed: ChannelName
    ) -> tuple[ServedName, Adapter, LibraryEntry, str]:
        """The binding, record, entry and backbone root of the channel's head for it."""
        try:
            revision = self.trust.head(parsed.channel)  # with a root: the last verified
        except UntrustedError as exc:
            raise ResolveRefused(str(exc)) from exc
        entry = revision["library"].get(parsed.capability)
        if entry is None:
            raise ResolveRefused(f"channel {parsed.channel!r} has no {parsed.capability!r}")
        adapter = self.client.get_adapter(entry["adapter_id"])
        binding = ServedName(
            lora_name, adapter["name"], adapter["id"], entry["manifest_root"],
            channel=parsed.channel, capability=parsed.capability,
            revision=int(revision["revision"]),
        )  # fmt: skip
        return binding, adapter, entry, revision["backbone"]

    def _check_backbone(self, base_model: str, name: str, backbone: str) -> None:
        """The adapter must have been trained on the weights this server serves."""
        from storage.manifest import manifest_of_path

        if not Path(base_model).is_dir():  # a hub name: nothing local to compare
            logger.warning("cannot check the backbone of %s against %r", name, base_model)
            return
        if base_model not in self._backbones:
            self._backbones[base_model] = manifest_of_path(Path(base_model)).root
        if self._backbones[base_model] != backbone:
            raise ResolveRefused(
                f"{name} was trained on backbone {backbone}, this server "
                f"serves {self._backbones[base_model]}"
            )

    @staticmethod
    def _check_root(path: Path, entry: LibraryEntry) -> None:
        from storage.manifest import manifest_of_file

        root = manifest_of_file(path / WEIGHTS_FILE).root
        if root != entry["manifest_root"]:
            raise ResolveRefused(
                f"{entry['name']}: manifest root {root} != the expected {entry['manifest_root']}"
            )
