"""What every demo step shares: the `Demo` state, the `Step` type and the printed output.

A step is a function of the `Demo`; `run_steps` runs a list of them in order, printing a
numbered title before each and its duration after. The registry the steps talk to is a real
`weact serve` child process from `registry.launcher`, closed with the rest of `Demo.stack`.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from cli.demo.weights import Weights
from registry.client import Adapter, RegistryClient, Revision
from registry.launcher import EmbeddedRegistry
from runtime.engine import AdapterSpec

console = Console(highlight=False, soft_wrap=True)


@dataclass(frozen=True)
class Training:
    """The `code` adapter trained by the demo."""

    out: Path
    data: Path
    nll_before: float
    nll_after: float


@dataclass
class Node:
    """A runtime node: what it pulled and the engine serving it."""

    revision: Revision
    specs: list[AdapterSpec]
    engine: Any
    episode: Any = None


@dataclass
class Demo:
    """State shared by the steps."""

    workdir: Path
    plain_weights: bool = False
    registry: EmbeddedRegistry | None = None
    tokens: dict[str, str] = field(default_factory=dict)
    clients: dict[str, RegistryClient] = field(default_factory=dict)
    weights: Weights | None = None
    backbone_root: str = ""
    adapters: dict[str, Adapter] = field(default_factory=dict)
    revisions: list[Revision] = field(default_factory=list)
    training: Training | None = None
    node: Node | None = None
    stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    def client(self, principal: str) -> RegistryClient:
        return self.clients[principal]

    def login(self, principal: str, token: str) -> None:
        assert self.registry is not None
        self.tokens[principal] = token
        client = RegistryClient(self.registry.url, token)
        self.clients[principal] = self.stack.enter_context(client)


@dataclass(frozen=True)
class Step:
    title: str
    run: Callable[[Demo], None]


def say(text: str) -> None:
    console.print(f"    {text}", markup=False)


def record(demo: Demo, rev: Revision, note: str) -> None:
    """Keep a new channel revision and print its library."""
    demo.revisions.append(rev)
    library = ", ".join(entry["name"] for _, entry in sorted(rev["library"].items()))
    say(f"{rev['channel']} r{rev['revision']}: {library}  [{rev['library_digest'][:12]}]  {note}")


def run_steps(demo: Demo, steps: Sequence[Step]) -> Demo:
    """Run `steps` in order, printing each; the registry and clients close at the end."""
    with demo.stack, warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # transformers deprecations, not ours
        for number, step in enumerate(steps, 1):
            started = time.perf_counter()
            console.print(f"[bold][{number}/{len(steps)}] {step.title}[/bold]")
            step.run(demo)
            console.print(f"    [dim]{time.perf_counter() - started:.2f} s[/dim]")
    return demo
