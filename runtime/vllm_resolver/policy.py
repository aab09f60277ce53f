"""What the plugin serves: the rule on adapter states and channel heads, as pure functions.

- By version name (`write@7`): only while the version is `approved` (never `revoked`,
  `rejected`). With `serve_candidates="evaluation"` (an evaluator's server) `candidate`
  versions are served by version name too.
- By channel name (`prod/write`): only the version that is that channel's current head for
  that capability, and only while it is `approved`, in either mode.

`names_to_drop` is the follower's decision: given what is served and what the registry now
says, which names must leave the engine (the next request for them resolves again).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

CandidateMode = Literal["no", "evaluation"]
DELETABLE = frozenset({"revoked", "rejected"})  # a version in these states is never served again


def servable_states(mode: CandidateMode, *, by_channel: bool = False) -> frozenset[str]:
    if mode == "evaluation" and not by_channel:
        return frozenset({"approved", "candidate"})
    return frozenset({"approved"})


def refusal(name: str, state: str, mode: CandidateMode, *, by_channel: bool = False) -> str | None:
    """Why `name` (a version in `state`) is not served, or None when it is."""
    if state in servable_states(mode, by_channel=by_channel):
        return None
    if state == "candidate":
        return (
            f"{name} is a candidate (not approved): served by version only on a server in "
            "evaluation mode (WEACT_VLLM_SERVE_CANDIDATES=evaluation)"
        )
    return f"{name} is {state}"


@dataclass(frozen=True)
class ServedName:
    """A name the engine answers for and the version it is bound to."""

    name: str  # what clients ask for: "write@2" or "prod/write"
    version: str  # the version name the LoRA is registered under: "write@2"
    adapter_id: int
    manifest_root: str  # verified when pulled
    channel: str | None = None  # for channel names: the channel ...
    capability: str | None = None  # ... and capability
    revision: int | None = None  # ... and the revision it was resolved at


def names_to_drop(
    served: Mapping[str, ServedName],
    states: Mapping[int, str],
    heads: Mapping[tuple[str, str], str | None],
    mode: CandidateMode,
) -> dict[str, str]:
    """Name -> why, for every served name whose binding the registry no longer backs.

    `states`: adapter id -> state, for the versions checked (a missing id is not judged);
    `heads`: (channel, capability) -> the version name the channel's head serves for it
    (None: the capability left the channel), for the channels checked.
    """
    drop = {}
    for name, bound in served.items():
        by_channel = bound.channel is not None
        state = states.get(bound.adapter_id)
        if state is not None and (
            why := refusal(bound.version, state, mode, by_channel=by_channel)
        ):
            drop[name] = why
            continue
        if bound.channel is None or bound.capability is None:
            continue
        key = (bound.channel, bound.capability)
        if key in heads and heads[key] != bound.version:
            head = heads[key]
            drop[name] = (
                f"channel {bound.channel!r} now serves {head} for {bound.capability!r}"
                if head
                else f"channel {bound.channel!r} no longer serves {bound.capability!r}"
            ) + f" (was {bound.version})"
    return drop


def deletable(states: Mapping[int, str], versions: Mapping[int, str]) -> list[str]:
    """Version names (of `versions`: adapter id -> name) whose files may go: revoked, rejected."""
    return sorted(versions[i] for i, s in states.items() if s in DELETABLE and i in versions)
