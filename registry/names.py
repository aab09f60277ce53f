"""Names that end up in URLs, files and tool calls: validated in one place."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from registry.errors import InvalidError

NAME_RE = re.compile(r"^[a-z][a-z0-9_+-]{0,63}$")
NODE_ID_MAX = 128
NODE_ID_PATTERN = r"^[A-Za-z0-9](\.?[A-Za-z0-9_:-])*\.?$"
"""Letters, digits and _ . : -, starting with a letter or digit, no two dots in a row."""
NODE_ID_RE = re.compile(NODE_ID_PATTERN)
LIBRARY_SCOPE = "library"


def check_name(kind: str, name: str) -> str:
    """A capability/channel name: lowercase, starts with a letter, no path separators."""
    if not NAME_RE.fullmatch(name):
        raise InvalidError(
            f"invalid {kind} name {name!r}: must match {NAME_RE.pattern} "
            "(lowercase letters, digits, _ + -; no paths)"
        )
    return name


def check_node_id(node_id: str) -> str:
    if len(node_id) > NODE_ID_MAX or not NODE_ID_RE.fullmatch(node_id):
        raise InvalidError(
            f"invalid node id {node_id!r}: must match {NODE_ID_PATTERN} "
            f"(at most {NODE_ID_MAX} characters)"
        )
    return node_id


ADAPTER_NAME_RE = re.compile(r"^([a-z][a-z0-9_+-]{0,63})@([0-9]{1,9})$")
ADAPTER_ID_RE = re.compile(r"^#?([0-9]{1,9})$")
# what the API's path parameter accepts: a name, or an id without leading zeros
ADAPTER_REF_PATTERN = r"^([a-z][a-z0-9_+-]{0,63}@[0-9]{1,9}|#?[1-9][0-9]{0,8})$"


@dataclass(frozen=True)
class AdapterRef:
    """How a person names an adapter version: `write@2` (capability and version) or an
    id (`#6`, or a plain `6`); exactly one of `id` and (`capability`, `version`) is set."""

    capability: str | None = None
    version: int | None = None
    id: int | None = None

    def __str__(self) -> str:
        return f"{self.capability}@{self.version}" if self.id is None else f"#{self.id}"


def parse_adapter_ref(text: str) -> AdapterRef:
    """`write@2` -> capability write, version 2; `#6` or `6` -> id 6; anything else is
    `InvalidError` naming both spellings."""
    text = text.strip()
    named = ADAPTER_NAME_RE.fullmatch(text)
    if named:
        return AdapterRef(capability=named.group(1), version=int(named.group(2)))
    numbered = ADAPTER_ID_RE.fullmatch(text)
    if numbered and int(numbered.group(1)) > 0:
        return AdapterRef(id=int(numbered.group(1)))
    raise InvalidError(
        f"invalid adapter {text!r}: name it CAPABILITY@VERSION (e.g. write@2) or by id (#6)"
    )


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """` (did you mean 'prod'?)` when a known name is close to `name`, else ``."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
