"""The replay check of a trained directory, run before it is published or pushed.

`weact train --publish`, `weact train publish` and `weact adapter push` of a directory made
by `weact train` (one holding `training.json`) all refuse through `refuse_replay`, with
`ReplayError` (exit 1 in the CLI), unless replay is allowed, when
- the samples supervise another capability than the one published, or
- a data file was already used by the parent or one of its ancestors (old data replayed).
Allowed, the refusal becomes `replay: true` in the provenance. The ancestors' data digests
come from the registry (`lineage` of the parent), so the check needs the client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from registry.errors import ReplayError

if TYPE_CHECKING:
    from registry.client.client import RegistryClient


def replay_reasons(
    training: Mapping[str, Any], capability: str, old_digests: set[str]
) -> list[str]:
    """Why publishing `training` as `capability` would replay data ([] when it would not)."""
    reasons = []
    others = sorted(set(training.get("covered", [])) - {capability})
    if others:
        reasons.append(f"the data supervises other capabilities: {others}")
    reused = sorted({d["sha256"] for d in training.get("data", [])} & old_digests)
    if reused:
        reasons.append(f"data already used by an ancestor: {reused}")
    return reasons


def ancestor_digests(client: RegistryClient, parent_id: int | None) -> set[str]:
    """The data digests in the provenance of the parent and every one of its ancestors."""
    if parent_id is None:
        return set()
    lineage = client.lineage(parent_id)
    chain = [*lineage["ancestors"], lineage["adapter"]]
    return {d for a in chain for d in a["provenance"].get("data_digests", [])}


def refuse_replay(
    training: Mapping[str, Any],
    *,
    client: RegistryClient,
    capability: str,
    parent_id: int | None,
    allow_replay: bool,
) -> bool:
    """Raise `ReplayError` if publishing `training` would replay data and that is not
    allowed; else whether it replays (the provenance's `replay`)."""
    reasons = replay_reasons(training, capability, ancestor_digests(client, parent_id))
    if reasons and not allow_replay:
        raise ReplayError(
            f"refusing to publish {capability!r} (use --allow-replay to record replay: true): "
            + "; ".join(reasons)
        )
    return bool(reasons)
