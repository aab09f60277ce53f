"""Principal names: one spelling per identity, so no two principals look alike.

A principal name must already be in Unicode NFKC form (a full-width "ａｌｉｃｅ" is refused,
naming "alice"), must not start or end with whitespace, and holds no control, format
(zero-width space, bidi marks), surrogate, private-use or unassigned characters, nor line
or paragraph separators. Names are compared by ``principal_key`` (NFKC, then case-folded):
a new principal whose key is an existing one's, "Alice" next to "alice", is refused.
"""

from __future__ import annotations

import unicodedata

from registry.errors import ConflictError, InvalidError

MAX_LENGTH = 128
_FORBIDDEN_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


def principal_key(name: str) -> str:
    """The comparison key of a name: NFKC-normalised, then case-folded."""
    return unicodedata.normalize("NFKC", name).casefold()


def check_principal_name(name: str) -> str:
    """``name`` if it is a well-formed principal name; else ``InvalidError`` saying why."""
    if not name or len(name) > MAX_LENGTH:
        raise InvalidError(f"principal name must be 1-{MAX_LENGTH} characters")
    if name != name.strip():
        raise InvalidError(f"principal name {name!r} starts or ends with whitespace")
    for char in name:
        category = unicodedata.category(char)
        if category in _FORBIDDEN_CATEGORIES:
            code = f"U+{ord(char):04X}"
            raise InvalidError(
                f"principal name {name!r} holds {code} ({unicodedata.name(char, 'unnamed')}, "
                f"category {category}): control, format and invisible characters are refused"
            )
    normal = unicodedata.normalize("NFKC", name)
    if normal != name:
        raise InvalidError(
            f"principal name {name!r} is not in Unicode NFKC form: write it {normal!r}"
        )
    return name


def refuse_lookalike(name: str, existing: str) -> ConflictError:
    """The error for a new name that compares equal to an existing principal's."""
    return ConflictError(
        {
            "message": f"principal {name!r} would be confused with the existing principal "
            f"{existing!r} (names are compared case-insensitively after NFKC); "
            f"use {existing!r} or another name",
            "principal": existing,
        }
    )
