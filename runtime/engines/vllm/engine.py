"""vLLM engine: every adapter of the library resident as a LoRA, one `LoRARequest` per step.

Tested on vLLM's CPU build (`make test-vllm`, SmolLM2-135M); the same code serves a CUDA
node. vLLM runs as an `AsyncLLM` (engine core in its own process) behind `VllmDriver`, so
sessions on many threads are batched together.

Adapter names: vLLM keys its prefix cache by the LoRA (name, path), so reloading new weights
under an old name can serve stale KV blocks (vLLM issues #30931, #42125). Every adapter is
registered under its version name (`write@7`; without a version, `write@<root prefix>`), and
`LoraNames` never lets a name refer to other weights nor hands out an integer id twice.

Library: all versions in use are resident (`max_loras` slots, every one loaded before it is
served). A session pins the library it started with: `swap_adapters` makes a revision the
library of new sessions (new versions added through vLLM's add-LoRA API, a capability the
revision drops is gone for new sessions) while open sessions keep theirs; `release_unused`
then removes, through vLLM's remove-LoRA API, every version no open session uses. A batch
of adapters is validated as a whole first (one AdapterLoadError naming every problem),
against the backbone's safetensors headers, and only then loaded.

Audit: vLLM keeps the weights in its worker process, which this process cannot read. The
audit therefore recomputes the manifest roots of the files as loaded (backbone directory,
each adapter's directory) and compares them with the roots expected at load, and its detail
says so: a bit flipped in the worker's memory after loading is not visible here.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import weakref
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from runtime.audit import audit_report
from runtime.engine import AdapterSpec, AuditReport, Engine
from runtime.engines.lora_fit import (
    WEIGHTS_FILE,
    adapter_problems,
    adapter_rank,
    backbone_shapes,
)
from runtime.engines.vllm.driver import VllmDriver, import_vllm
from runtime.engines.vllm.names import LoraNames, Resident
from runtime.engines.vllm.session import VllmSession
from runtime.errors import AdapterLoadError, BackboneLoadError

__all__ = ["VllmEngine", "cpu_dtype", "fitting_rank", "kv_cache_bytes", "use_every_core"]

logger = logging.getLogger(__name__)

CPU_KV_CACHE_BYTES = 512 * 2**20  # on CPU the KV cache is host RAM: a fixed, small share
# vLLM's allowed max_lora_rank values. Its LoRA buffers are padded to that rank, so the
# smallest one that fits the library is the default (8x less LoRA work than 64 at rank 8).
LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)
# started with no library (a node that follows a channel): slots and rank for what may come
EMPTY_LIBRARY_LORAS = 8
EMPTY_LIBRARY_RANK = 64
AUDIT_SCOPE = (
    "vLLM: roots recomputed from the files as loaded (backbone directory, adapter "
    "directories); the weights resident in vLLM's worker process cannot be read from here"
)


def kv_cache_bytes(
    backbone: str | os.PathLike[str], sequences: int, max_len: int, dtype: str
) -> int:
    """The KV cache that holds `sequences` contexts of `max_len` tokens at once (keys and
    values of every layer, from the backbone's config.json), so that none of them is
    preempted and recomputed while the others decode."""
    config = json.loads((Path(backbone) / "config.json").read_text())
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads") or heads
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    width = {"float32": 4, "bfloat16": 2, "float16": 2}[dtype]
    layers = int(config["num_hidden_layers"])
    return 2 * layers * int(kv_heads) * int(head_dim) * width * max_len * sequences


def cpu_dtype(cpuinfo: str = "/proc/cpuinfo") -> str:
    """bf16 where the CPU has AVX512-BF16 (vLLM's bf16 CPU kernels need it, and torch emulates
    bf16 without it: 65x slower matmuls than fp32 on an AVX2-only EPYC), else fp32.

    On an Intel Sapphire Rapids node (AMX) bf16 prefilled 1.7x faster than fp32 and
    halves the KV cache per token (`bench/bench_vllm_lora.py`)."""
    try:
        flags = Path(cpuinfo).read_text()
    except OSError:
        return "float32"
    return "bfloat16" if "avx512_bf16" in flags else "float32"


def use_every_core(environ: dict[str, str] | None = None) -> None:
    """vLLM's CPU build binds its worker to the cores left after reserving one for the front
    end: on a 2-core node that is one core for the model. Unless the operator set them, bind
    the worker to every core this process may run on and reserve none (the front end only
    tokenizes and schedules)."""
    env = os.environ if environ is None else environ
    cores = ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))
    env.setdefault("VLLM_CPU_OMP_THREADS_BIND", cores)
    env.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")


class VllmEngine(Engine):
    """vLLM with LoRA enabled; adapters addressed by version name, sessions batched."""

    follows_channels = True

    def __init__(
        self,
        backbone: str | os.PathLike[str],
        adapters: Iterable[AdapterSpec] = (),
        *,
        max_loras: int | None = None,
        max_lora_rank: int | None = None,
        tokenizer: Any = None,
        backbone_root: str | None = None,
        **engine_args: Any,
    ) -> None:
        """`engine_args` go to vLLM's `AsyncEngineArgs` (dtype, max_model_len, block_size,
        kv_cache_memory_bytes, ...); on CPU the dtype defaults to `cpu_dtype()`. `max_loras`
        (default: twice the library, at least 4) bounds the versions resident at once, old
        and new ones during a swap included;
        `max_lora_rank` (default: the smallest vLLM rank that fits the initial library) is
        the largest rank a later version may have. Started empty (a follower), the defaults
        are 8 slots of rank 64."""
        from runtime.models import load_tokenizer

        import_vllm()  # the install hint before anything else
        specs = list(adapters)
        self.backbone_dir = Path(backbone)
        if not self.backbone_dir.is_dir() or not any(self.backbone_dir.glob("*.safetensors")):
            raise BackboneLoadError(f"{backbone}: not a directory with *.safetensors weights")
        self.max_loras = max_loras or max(EMPTY_LIBRARY_LORAS if not specs else 4, 2 * len(specs))
        self.max_lora_rank = max_lora_rank or fitting_rank(specs)
        self._shapes = backbone_shapes(self.backbone_dir)
        self._expected_backbone = backbone_root
        self._names = LoraNames()
        self._resident: dict[str, Resident] = {}  # version name -> loaded adapter
        self._library: dict[str, str] = {}  # capability -> version name, for new sessions
        self._sessions: weakref.WeakSet[VllmSession] = weakref.WeakSet()
        self._lock = threading.RLock()
        roots = self._check_batch(specs, replace=False)  # fail before the minute-long start
        self.driver = VllmDriver(**self._engine_args(engine_args))
        self.tokenizer = tokenizer or load_tokenizer(self.backbone_dir)
        self.vocab_size = _vocab_size(self.backbone_dir)
        try:
            self._add_checked(specs, roots, replace=False)  # checked (and hashed) once
        except BaseException:
            self.close()
            raise

    def _engine_args(self, extra: Mapping[str, Any]) -> dict[str, Any]:
        from vllm.platforms import current_platform

        args: dict[str, Any] = {
            "model": str(self.backbone_dir),
            "enable_lora": True,
            "max_loras": self.max_loras,
            "max_cpu_loras": self.max_loras,
            "max_lora_rank": self.max_lora_rank,
            "enable_prefix_caching": True,
        }
        sized = {"kv_cache_memory_bytes", "gpu_memory_utilization"} & set(extra)
        if current_platform.is_cpu():
            use_every_core()
            if not sized:
                args["kv_cache_memory_bytes"] = CPU_KV_CACHE_BYTES
            # vLLM's CPU default casts the weights to bf16, emulated where the CPU has no
            # AVX512-BF16: an episode took minutes on an AVX2-only node instead of seconds
            args["dtype"] = cpu_dtype()
        return {**args, **extra}

    # -- library ---------------------------------------------------------------------------
    @property
    def adapters(self) -> Mapping[str, AdapterSpec]:
        """The current library: capability -> spec (what new sessions get)."""
        with self._lock:
            return {cap: self._resident[key].spec for cap, key in self._library.items()}

    @property
    def resident(self) -> Mapping[str, Resident]:
        """Every version loaded in vLLM, by version name (library and pinned by sessions)."""
        with self._lock:
            return dict(self._resident)

    def library_snapshot(self) -> dict[str, Resident]:
        """capability -> resident version, as a new session pins it."""
        with self._lock:
            return {cap: self._resident[key] for cap, key in self._library.items()}

    def add_adapters(self, specs: Iterable[AdapterSpec], replace: bool = False) -> None:
        """Validate every adapter (one AdapterLoadError for all problems), then load them.

        Without `replace` the capabilities join the library (each name once); with it the
        given specs become the whole library of new sessions (see `swap_adapters`).
        """
        specs = list(specs)
        with self._lock:
            self._add_checked(specs, self._check_batch(specs, replace), replace)

    def _add_checked(
        self, specs: Sequence[AdapterSpec], roots: Mapping[str, str], replace: bool
    ) -> None:
        """Load what `_check_batch` passed (`roots`: its file roots) and update the library."""
        with self._lock:
            fresh = [
                s for s in specs if self._names.name_of(s, roots[s.name]) not in self._resident
            ]
            self._load_all(fresh, roots)
            keys = {s.name: self._names.name_of(s, roots[s.name]) for s in specs}
            self._library = keys if replace else {**self._library, **keys}
        logger.info("library: %s", ", ".join(sorted(self._library.values())) or "(empty)")

    def set_library(self, specs: Iterable[AdapterSpec]) -> None:
        """A followed channel's revision becomes the library of new sessions (see
        `swap_adapters`); `release_unused` then removes what no open session uses."""
        self.add_adapters(specs, replace=True)

    def swap_adapters(self, specs: Iterable[AdapterSpec]) -> None:
        """Make `specs` (a revision's whole library) what new sessions get; open ones keep
        theirs. New versions are loaded next to the old; a capability not in `specs` is no
        longer offered. Atomic: on any problem nothing changes."""
        self.add_adapters(specs, replace=True)

    def release_unused(self) -> list[str]:
        """Remove from vLLM every version that neither the library nor an open session uses."""
        with self._lock:
            used = set(self._library.values())
            for session in list(self._sessions):
                used.update(r.key for r in session.pinned.values())
            unused = sorted(set(self._resident) - used)
            for key in unused:
                self.driver.remove_lora(self._resident.pop(key).lora.int_id)
        if unused:
            logger.info("removed from vLLM: %s", ", ".join(unused))
        return unused

    def _check_batch(self, specs: Sequence[AdapterSpec], replace: bool) -> dict[str, str]:
        """capability -> file root for every spec (each adapter hashed once, here);
        AdapterLoadError naming every problem."""
        names = [s.name for s in specs]
        taken = set() if replace else set(self._library)
        problems = [
            f"adapter name {n!r} is used twice"
            for n in sorted({n for n in names if names.count(n) > 1 or n in taken})
        ]
        problems.extend(f"adapter name {n!r} is not valid" for n in names if not n)
        roots: dict[str, str] = {}
        for spec in specs:
            local, root = adapter_problems(Path(spec.path), self._shapes, self.max_lora_rank)
            if root:
                roots[spec.name] = root
            if root and spec.manifest_root not in (None, root):
                local.append(f"manifest root {root} != expected {spec.manifest_root}")
            if root and (clash := self._names.check(spec, root)):
                local.append(clash)
            problems.extend(f"adapter {spec.name!r} ({spec.path}): {p}" for p in local)
        problems.extend(self._capacity_problems(specs, roots))
        if problems:
            raise AdapterLoadError("; ".join(problems))
        return roots

    def _capacity_problems(
        self, specs: Sequence[AdapterSpec], roots: Mapping[str, str]
    ) -> list[str]:
        keys = {self._names.name_of(s, roots[s.name]) for s in specs if s.name in roots}
        needed = len(set(self._resident) | keys)
        if needed <= self.max_loras:
            return []
        return [
            f"{needed} adapter versions would be resident, more than max_loras={self.max_loras}: "
            "release unused versions first, or start the engine with a larger max_loras"
        ]

    def _load_all(self, specs: Sequence[AdapterSpec], roots: Mapping[str, str]) -> None:
        """Load each spec into vLLM; on a failure, unload this batch's and raise."""
        from vllm.lora.request import LoRARequest

        loaded: list[Resident] = []
        try:
            for spec in specs:
                lora = self._names.assign(spec, roots[spec.name])
                request = LoRARequest(lora.name, lora.int_id, str(Path(spec.path).resolve()))
                if not self.driver.add_lora(request):
                    raise AdapterLoadError(f"vLLM did not load {lora.name} from {spec.path}")
                loaded.append(Resident(spec, lora, request))
        except Exception as exc:
            for resident in loaded:
                self.driver.remove_lora(resident.lora.int_id)
            if isinstance(exc, AdapterLoadError):
                raise
            raise AdapterLoadError(f"vLLM refused an adapter: {exc}") from exc
        for resident in loaded:
            self._resident[resident.key] = resident
            logger.info("adapter %s resident as %s", resident.spec.name, resident.key)

    # -- sessions --------------------------------------------------------------------------
    def new_session(self) -> VllmSession:
        session = VllmSession(self)
        with self._lock:
            self._sessions.add(session)
        return session

    def forget(self, session: VllmSession) -> None:
        with self._lock:
            self._sessions.discard(session)

    # -- audit -----------------------------------------------------------------------------
    def backbone_expected_root(self) -> str:
        if self._expected_backbone is None:
            from storage.manifest import manifest_of_path

            self._expected_backbone = manifest_of_path(self.backbone_dir).root
        return self._expected_backbone

    def audit(self) -> AuditReport:
        """Roots of the files vLLM loaded, against the roots expected at load (see module
        docstring for what this cannot see). Library adapters are named by capability,
        versions pinned only by open sessions by version name."""
        from storage.manifest import manifest_of_file, manifest_of_path

        expected_backbone = self.backbone_expected_root()
        with self._lock:
            label = {key: cap for cap, key in self._library.items()}
            resident = {label.get(k, k): r for k, r in self._resident.items()}
        adapters = {
            n: manifest_of_file(Path(r.spec.path) / WEIGHTS_FILE).root for n, r in resident.items()
        }
        expected = {n: r.spec.manifest_root or r.lora.root for n, r in resident.items()}
        backbone = manifest_of_path(self.backbone_dir).root
        report = audit_report(backbone, expected_backbone, adapters, expected)
        detail = "; ".join(filter(None, [report.detail, AUDIT_SCOPE]))
        return AuditReport(report.ok, report.backbone_root, report.adapters, detail)

    # -- lifecycle -------------------------------------------------------------------------
    def close(self) -> None:
        """Shut vLLM down (its engine core process exits). Idempotent."""
        driver = self.__dict__.get("driver")
        if driver is not None:
            driver.close()

    def __enter__(self) -> VllmEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def fitting_rank(specs: Sequence[AdapterSpec]) -> int:
    """The smallest vLLM max_lora_rank that serves every adapter of `specs`."""
    if not specs:  # a follower learns its ranks only after it starts
        return EMPTY_LIBRARY_RANK
    needed = max(adapter_rank(Path(s.path)) for s in specs)  # headers only: nothing hashed
    return next((r for r in LORA_RANKS if r >= needed), LORA_RANKS[-1])


def _vocab_size(backbone_dir: Path) -> int:
    try:
        return int(json.loads((backbone_dir / "config.json").read_text())["vocab_size"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BackboneLoadError(f"{backbone_dir}/config.json: no vocab_size ({exc})") from exc
