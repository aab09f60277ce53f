"""Names the registry owns on a vLLM server: `capability@N` (a version) and
`channel/capability` (a channel's current head for that capability).

Only the plugin registers LoRAs under such names; `squat_refusal` is the rule that keeps
`/v1/load_lora_adapter` from doing so (or from loading anything out of the plugin's library).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

VERSION_RE = re.compile(r"^(?P<capability>[A-Za-z0-9_.+-]+)@(?P<version>[0-9]+)$")
CHANNEL_RE = re.compile(r"^(?P<channel>[A-Za-z0-9_.-]+)/(?P<capability>[A-Za-z0-9_.+-]+)$")


@dataclass(frozen=True)
class VersionName:
    capability: str
    version: int

    def __str__(self) -> str:
        return f"{self.capability}@{self.version}"


@dataclass(frozen=True)
class ChannelName:
    channel: str
    capability: str

    def __str__(self) -> str:
        return f"{self.channel}/{self.capability}"


def parse_name(name: str) -> VersionName | ChannelName | None:
    """The registry name `name` spells, or None for a name the registry does not own."""
    if m := VERSION_RE.match(name):
        return VersionName(m["capability"], int(m["version"]))
    if m := CHANNEL_RE.match(name):
        return ChannelName(m["channel"], m["capability"])
    return None


def is_registry_name(name: str) -> bool:
    return parse_name(name) is not None


def squat_refusal(lora_name: str, lora_path: str, library_dir: Path) -> str | None:
    """Why a `/v1/load_lora_adapter` call must be refused, or None to let vLLM load it.

    A registry-shaped name would serve unverified weights under a name clients trust; a
    path inside the plugin's library would serve the plugin's files without its checks
    (a revoked version's files among them until they are deleted).
    """
    if is_registry_name(lora_name):
        return (
            f"{lora_name!r} is a registry name (capability@N or channel/capability): only "
            "the WeAct registry plugin loads such names, on request, verified"
        )
    if not lora_path:
        return None
    try:
        inside = Path(lora_path).resolve().is_relative_to(Path(library_dir).resolve())
    except (OSError, ValueError):
        inside = False
    if inside:
        return f"{lora_path!r} is inside the WeAct registry plugin's library: load by name"
    return None
