"""Names that end up in URLs, files and tool calls: validated in one place."""

from __future__ import annotations

import re

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
