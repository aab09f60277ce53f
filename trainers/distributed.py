"""Data-parallel training under `torchrun` or `accelerate launch`: torch.distributed and DDP.

`weact train` reads the launcher's environment (WORLD_SIZE, RANK, LOCAL_RANK, MASTER_ADDR,
MASTER_PORT, as torchrun and accelerate set them) and, with more than one process, joins the
process group: gloo on CPU, nccl with one GPU per process (`cuda:LOCAL_RANK`). Every rank
builds the same seeded schedule of global batches; rank r trains on `batch[r::world_size]`
(DistributedSampler's split, without its padding, which would repeat samples) and
DistributedDataParallel averages the gradients. Each rank's losses are weighted by
world_size / len(batch), so the averaged gradient is the mean over the global batch, as one
process computes it, even when the last batch does not divide evenly. Rank 0 alone writes
the adapter and publishes; the other ranks wait for its outcome and exit.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from trainers.errors import TrainerError

T = TypeVar("T")


class DistributedError(TrainerError, RuntimeError):
    """A launcher environment that does not add up, or rank 0 failing for the others."""


@dataclass(frozen=True)
class World:
    """This process's place in the job; `size == 1` is a plain single-process run."""

    size: int = 1
    rank: int = 0
    local_rank: int = 0
    launcher: str | None = None

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def cuda(self) -> bool:
        """One GPU per process when the job is distributed and CUDA is there; else CPU."""
        import torch

        return self.size > 1 and torch.cuda.is_available()

    @property
    def device(self) -> str:
        return f"cuda:{self.local_rank}" if self.cuda else "cpu"

    @property
    def backend(self) -> str | None:
        if self.size == 1:
            return None
        return "nccl" if self.cuda else "gloo"

    def record(self) -> dict[str, Any]:
        """What training.json (and so the published provenance) says about the job."""
        return {"world_size": self.size, "launcher": self.launcher, "backend": self.backend}

    def shard(self, batch: Sequence[T]) -> list[T]:
        """This rank's share of a global batch."""
        return list(batch[self.rank :: self.size])


SINGLE = World()
"""A plain single-process run."""


def _int(environ: Mapping[str, str], name: str, default: int) -> int:
    raw = environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise DistributedError(f"${name} is {raw!r}, not an integer") from None


def launcher_of(environ: Mapping[str, str]) -> str:
    """accelerate launch sets ACCELERATE_MIXED_PRECISION (and runs torchrun under it for
    several processes); torchrun sets TORCHELASTIC_RUN_ID; anything else set WORLD_SIZE."""
    if "ACCELERATE_MIXED_PRECISION" in environ:
        return "accelerate"
    if "TORCHELASTIC_RUN_ID" in environ:
        return "torchrun"
    return "env"


def detect(environ: Mapping[str, str] | None = None) -> World:
    """The job described by the launcher's environment variables (one process without them)."""
    env = os.environ if environ is None else environ
    size = _int(env, "WORLD_SIZE", 1)
    rank = _int(env, "RANK", 0)
    local = _int(env, "LOCAL_RANK", 0)
    if size < 1 or not 0 <= rank < size or local < 0:
        raise DistributedError(f"bad launcher environment: WORLD_SIZE={size} RANK={rank}")
    if size == 1:
        return World()
    return World(size, rank, local, launcher_of(env))


@contextmanager
def session(world: World) -> Iterator[World]:
    """The process group for the block (a no-op for one process or one already joined)."""
    if world.size == 1:
        yield world
        return
    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        yield world
        return
    if world.cuda:
        torch.cuda.set_device(world.local_rank)
    dist.init_process_group(backend=world.backend, init_method="env://")
    try:
        yield world
    finally:
        dist.destroy_process_group()


def on_main(world: World, work: Callable[[], T]) -> T | None:
    """Run `work` on rank 0 while the others wait; an error there is raised on every rank
    (as itself on rank 0). Returns `work`'s result on rank 0, None elsewhere."""
    if world.size == 1:
        return work()
    import torch.distributed as dist

    result: T | None = None
    error: BaseException | None = None
    if world.main:
        try:
            result = work()
        except Exception as exc:  # reported to every rank, then raised here
            error = exc
    outcome: list[Any] = [None if error is None else f"{type(error).__name__}: {error}"]
    dist.broadcast_object_list(outcome, src=0)
    if error is not None:
        raise error
    if outcome[0] is not None:
        raise DistributedError(f"rank 0 failed: {outcome[0]}")
    return result


def wrap_model(world: World, model: Any, params: Sequence[Any]) -> Any:
    """DDP over `model` whose trainable `params` start as rank 0's. Only those are
    broadcast: DDP's own initial sync would send the whole frozen backbone."""
    if world.size == 1:
        return model
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    for p in params:
        dist.broadcast(p.data, src=0)
    devices = [world.local_rank] if world.cuda else None
    return DistributedDataParallel(
        model, device_ids=devices, forward_sync_buffers=False, init_sync=False
    )


def gathered(world: World, value: T) -> list[T]:
    """`value` of every rank, in rank order."""
    if world.size == 1:
        return [value]
    import torch.distributed as dist

    out: list[Any] = [None] * world.size
    dist.all_gather_object(out, value)
    return out


def global_sum(world: World, value: Any) -> Any:
    """The sum of a scalar tensor over every rank."""
    if world.size == 1:
        return value
    import torch.distributed as dist

    total = value.detach().clone()
    dist.all_reduce(total)
    return total
