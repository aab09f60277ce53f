"""The adapter-control tools of a WeAct episode: `load_lora` / `offload_lora`.

- `AdapterControl` is the paper's internal action pair for one episode: loading while another
  adapter is active, loading an unknown capability, loading out of the policy's order and
  offloading with none active are tool errors (typed errors turned into a message the model
  reads), never crashes.
- `lora_tool_schemas` describes them to the model from the capability descriptions.
- `ToolOutcome` is what any tool call returns to the model (these and external ones).

`runtime.mcp_server` serves `load_lora` / `offload_lora` to MCP clients; external tools come
from `runtime.mcp_client`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runtime.chat import LOAD_LORA, OFFLOAD_LORA, tool_schema
from runtime.engine import AdapterSpec, EngineSession, SwitchRecord
from runtime.errors import RuntimeEngineError, ToolArgumentError, UnknownAdapterError
from runtime.policy import Policy

INTERNAL_TOOLS = (LOAD_LORA, OFFLOAD_LORA)
# What load_lora tells the model about the paper's capabilities when no registry describes them.
DEFAULT_DESCRIPTIONS = {
    "plan": "Break the task into steps and decide what to look up.",
    "search": "Query the knowledge base with the search tool and collect evidence.",
    "write": "Write the final answer from the collected evidence.",
    "code": "Write and explain code.",
}


@dataclass(frozen=True)
class ToolOutcome:
    """What a tool call returns to the model: JSON text, flagged when it is an error."""

    content: str
    is_error: bool = False
    switch: SwitchRecord | None = None

    @classmethod
    def error(cls, message: str) -> ToolOutcome:
        return cls(json.dumps({"error": message}), is_error=True)

    @property
    def message(self) -> str:
        return json.loads(self.content)["error"] if self.is_error else self.content


def listing(library: Mapping[str, AdapterSpec], order: Sequence[str] | None = None) -> list[str]:
    """The order in which load_lora lists the capabilities: `order` (a permutation of the
    library's names) or sorted."""
    if order is None:
        return sorted(library)
    names = list(order)
    if sorted(names) != sorted(library):
        odd = [n for n in names if n not in library or names.count(n) > 1]
        missing = [n for n in sorted(library) if n not in names]
        raise UnknownAdapterError(",".join(odd + missing), sorted(library))
    return names


def load_description(library: Mapping[str, AdapterSpec], order: Sequence[str] | None = None) -> str:
    lines = [
        f"- {n}: {library[n].description or 'no description'}" for n in listing(library, order)
    ]
    return (
        "Load the LoRA adapter of one capability so that it shapes your next turns. At most "
        "one adapter is active: call offload_lora first if another one is. Capabilities:\n"
        + "\n".join(lines)
    )


OFFLOAD_DESCRIPTION = (
    "Offload the active LoRA adapter; the bare backbone speaks next and may load another one."
)


def lora_tool_schemas(
    library: Mapping[str, AdapterSpec], order: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """load_lora and offload_lora as the model is shown them, the capabilities listed in
    `order` (enum and description lines; default sorted: the constrained soft choice scores
    its moves under every rotation of it); none for an empty library (the bare backbone
    alone has nothing to load)."""
    if not library:
        return []
    capability = {
        "type": "string",
        "enum": listing(library, order),
        "description": "the capability to load",
    }
    return [
        tool_schema(
            LOAD_LORA, load_description(library, order), {"capability": capability}, ["capability"]
        ),
        tool_schema(OFFLOAD_LORA, OFFLOAD_DESCRIPTION),
    ]


class AdapterControl:
    """load_lora / offload_lora for one episode's engine session, under its policy."""

    def __init__(
        self,
        session: EngineSession,
        policy: Policy,
        library: Mapping[str, AdapterSpec],
        on_switch: Callable[[SwitchRecord], None] | None = None,
    ) -> None:
        self.session = session
        self.policy = policy
        self.library = library
        self.on_switch = on_switch
        self.loaded: list[str] = []
        self.switches: list[SwitchRecord] = []
        self._lock = threading.RLock()

    def load(self, capability: str) -> SwitchRecord:
        with self._lock:
            # the model hears "offload first" / "unknown" before any policy complaint
            self.session.check_activate(capability)
            self.policy.check_load(capability, self.loaded)
            record = self.session.activate(capability)
            self.loaded.append(capability)
            return self._record(record)

    def offload(self) -> SwitchRecord:
        with self._lock:
            return self._record(self.session.deactivate())

    def _record(self, record: SwitchRecord) -> SwitchRecord:
        self.switches.append(record)
        if self.on_switch is not None:
            self.on_switch(record)
        return record

    def call(self, name: str, arguments: Mapping[str, Any]) -> ToolOutcome:
        """Run an internal tool call; every failure becomes a tool error for the model."""
        try:
            if name == LOAD_LORA:
                record = self.load(_capability_arg(arguments))
            elif name == OFFLOAD_LORA:
                _no_args(arguments)
                record = self.offload()
            else:
                return ToolOutcome.error(f"unknown internal tool {name!r}")
        except RuntimeEngineError as exc:
            return ToolOutcome.error(str(exc))
        # Only what the model needs, and nothing that varies between runs: the switch time is
        # in the step record and the metrics, and the trainers' trajectories show this text.
        result = {"ok": True, "active": self.session.active}
        return ToolOutcome(json.dumps(result), switch=record)


def _capability_arg(arguments: Mapping[str, Any]) -> str:
    extra = set(arguments) - {"capability"}
    capability = arguments.get("capability")
    if not isinstance(capability, str) or extra:
        raise ToolArgumentError(
            'load_lora takes exactly one argument, "capability" (a string); got '
            + json.dumps(dict(arguments))
        )
    return capability


def _no_args(arguments: Mapping[str, Any]) -> None:
    if arguments:
        raise ToolArgumentError(
            f"offload_lora takes no arguments; got {json.dumps(dict(arguments))}"
        )
