"""What changed between two revisions of a channel: per capability, from which version to which.

A capability is ``added`` (only in the later revision), ``removed`` (only in the earlier),
``changed`` (another adapter version, or the same id with other weights) or ``unchanged``.
The hard order is compared as a whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from registry.domain import LibraryEntry, Revision


class Change(StrEnum):
    ADDED = "added"
    REMOVED = "removed"
    CHANGED = "changed"
    UNCHANGED = "unchanged"


@dataclass(frozen=True)
class CapabilityChange:
    capability: str
    change: Change
    before: LibraryEntry | None
    after: LibraryEntry | None


@dataclass(frozen=True)
class RevisionDiff:
    before: Revision
    after: Revision
    capabilities: list[CapabilityChange]

    @property
    def changes(self) -> list[CapabilityChange]:
        """The capabilities that differ (``unchanged`` ones left out)."""
        return [c for c in self.capabilities if c.change is not Change.UNCHANGED]

    @property
    def order_changed(self) -> bool:
        return self.before.order != self.after.order

    @property
    def empty(self) -> bool:
        return not self.changes and not self.order_changed


def _change(before: LibraryEntry | None, after: LibraryEntry | None) -> Change:
    if before is None:
        return Change.ADDED
    if after is None:
        return Change.REMOVED
    same = (before.adapter_id, before.manifest_root) == (after.adapter_id, after.manifest_root)
    return Change.UNCHANGED if same else Change.CHANGED


def diff_revisions(before: Revision, after: Revision) -> RevisionDiff:
    """Compare two revisions' libraries, capability by capability (sorted by name)."""
    names = sorted(before.library.keys() | after.library.keys())
    capabilities = [
        CapabilityChange(
            capability=name,
            change=_change(before.library.get(name), after.library.get(name)),
            before=before.library.get(name),
            after=after.library.get(name),
        )
        for name in names
    ]
    return RevisionDiff(before=before, after=after, capabilities=capabilities)


def history(revisions: list[Revision]) -> list[tuple[Revision, RevisionDiff | None]]:
    """Each revision, newest first, with its diff from the one before (None for the first)."""
    pairs: list[tuple[Revision, RevisionDiff | None]] = []
    previous: Revision | None = None
    for revision in revisions:
        pairs.append((revision, None if previous is None else diff_revisions(previous, revision)))
        previous = revision
    return list(reversed(pairs))
