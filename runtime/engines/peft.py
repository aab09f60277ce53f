"""The reference engine: a transformers backbone with every adapter of a library resident.

Each targeted `nn.Linear` gets one forward hook, installed once. The hook reads a single
shared `ActiveConfig` holder and adds `scale * B(A(x))` of the adapter it names (nothing for
None), so a switch is one attribute store read by every LoRA layer: no module walk, no weight
copy. peft's `set_adapter` walks every module instead (9-23 ms on SmolLM2).

Adapters are read from PEFT directories (`adapter_config.json` + `adapter_model.safetensors`,
keys `base_model.model.<module>.lora_A.weight`). A batch of adapters is validated as a whole
first (every problem of every adapter collected into one AdapterLoadError) and only then
applied. The original tensors stay resident under their PEFT names so that the audit can
recompute each adapter's manifest root from memory.

Sessions: the engine sets the holder to a session's configuration inside one lock around
every forward pass, so concurrent sessions interleave safely token by token. Adapters are
resident under their version name (`write@7`); a session pins the library it started with,
so `swap_adapters` serves a new version to new episodes while running ones finish on theirs,
and `release_unused` then frees versions nobody uses.

Prefetch runs in a background thread in small chunks, only while no generate is in progress
(an external tool call in flight), and stops as soon as foreground work starts.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.audit import audit_report, manifest_of_resident, torch_dtype
from runtime.engine import (
    AdapterSpec,
    AuditReport,
    Config,
    Engine,
    EngineSession,
    GenerationResult,
)
from runtime.errors import (
    AdapterLoadError,
    BackboneLoadError,
    InvalidTokensError,
    SessionClosedError,
    UnknownAdapterError,
)
from runtime.kvcache import (
    DEFAULT_BUDGET_BYTES,
    CacheEntry,
    PrefixCacheStore,
    crop,
    extend,
    new_entry,
)

logger = logging.getLogger(__name__)

CONFIG_FILE = "adapter_config.json"
WEIGHTS_FILE = "adapter_model.safetensors"
PEFT_PREFIX = "base_model.model."
PREFILL_CHUNK = 512  # tokens per forward in a foreground prefill, so sessions interleave
PREFETCH_CHUNK = 32  # tokens per background forward: foreground work waits at most one


class ActiveConfig:
    """The one shared pointer every LoRA layer reads: the adapter name, or None (bare)."""

    __slots__ = ("name",)

    def __init__(self) -> None:
        self.name: Config = None


class LoraHook:
    """Forward hook of one nn.Linear: `y + scale * B(A(x))` for the holder's adapter."""

    __slots__ = ("holder", "linear", "weights")

    def __init__(self, holder: ActiveConfig) -> None:
        from torch.nn.functional import linear

        self.holder = holder
        self.linear = linear  # bound once: the hook runs on every targeted layer's forward
        self.weights: dict[str, tuple[Any, Any, float]] = {}

    def __call__(self, module: Any, args: tuple[Any, ...], output: Any) -> Any:
        lora = self.weights.get(self.holder.name)  # type: ignore[arg-type]
        if lora is None:
            return None
        a, b, scale = lora
        return output + self.linear(self.linear(args[0], a), b) * scale


# --------------------------------------------------------------------------- adapters


@dataclass(frozen=True)
class LoadedAdapter:
    """An adapter read and validated against the backbone, not yet applied."""

    spec: AdapterSpec
    rank: int
    alpha: float
    file_root: str
    tensors: dict[str, Any]  # PEFT name -> original tensor, as stored in the file
    modules: dict[str, tuple[Any, Any, float]]  # module path -> (A, B, scale) for forward


def _read_config(path: Path, problems: list[str]) -> dict[str, Any]:
    try:
        cfg = json.loads((path / CONFIG_FILE).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        problems.append(f"{CONFIG_FILE}: {exc}")
        return {}
    if not isinstance(cfg, dict):
        problems.append(f"{CONFIG_FILE}: not a JSON object")
        return {}
    if cfg.get("peft_type", "LORA") != "LORA":
        problems.append(f"peft_type {cfg.get('peft_type')!r} is not LORA")
    for key, ok in (("use_dora", False), ("fan_in_fan_out", False), ("bias", "none")):
        if cfg.get(key, ok) not in (ok, None):
            problems.append(f"{key}={cfg[key]!r} is not supported")
    r, alpha = cfg.get("r"), cfg.get("lora_alpha")
    if not isinstance(r, int) or isinstance(r, bool) or r <= 0:
        problems.append(f"r must be a positive integer, got {r!r}")
    if not isinstance(alpha, int | float) or isinstance(alpha, bool):
        problems.append(f"lora_alpha must be a number, got {alpha!r}")
    return cfg


def _pattern(patterns: Mapping[str, Any] | None, module: str, default: Any) -> Any:
    """peft's rank_pattern/alpha_pattern lookup: a key matches a module path suffix."""
    for key, value in (patterns or {}).items():
        if module == key or module.endswith("." + key):
            return value
    return default


def _split_key(key: str) -> tuple[str, str] | None:
    """`base_model.model.<module>.lora_A.weight` -> (module, "A"); None if not of that form."""
    for part in ("A", "B"):
        suffix = f".lora_{part}.weight"
        if key.startswith(PEFT_PREFIX) and key.endswith(suffix):
            return key[len(PEFT_PREFIX) : -len(suffix)], part
    return None


def _pair_tensors(tensors: Mapping[str, Any], problems: list[str]) -> dict[str, dict[str, Any]]:
    pairs: dict[str, dict[str, Any]] = {}
    for key, t in tensors.items():
        split = _split_key(key)
        if split is None:
            problems.append(f"unsupported tensor {key!r} (only lora_A/lora_B weights)")
            continue
        if not t.is_floating_point():
            problems.append(f"{key}: dtype {t.dtype} is not floating point")
            continue
        pairs.setdefault(split[0], {})[split[1]] = t
    for module, pair in pairs.items():
        if set(pair) != {"A", "B"}:
            problems.append(f"{module}: lora_A and lora_B must both be present")
    if not pairs:
        problems.append("no LoRA tensors")
    return pairs


def _check_module(
    model_modules: Mapping[str, Any], module: str, a: Any, b: Any, rank: int
) -> str | None:
    import torch

    target = model_modules.get(module)
    if not isinstance(target, torch.nn.Linear):
        return f"{module}: no nn.Linear of that name in the backbone"
    out_f, in_f = target.out_features, target.in_features
    if tuple(a.shape) != (rank, in_f) or tuple(b.shape) != (out_f, rank):
        return (
            f"{module}: lora_A {list(a.shape)} / lora_B {list(b.shape)} do not fit "
            f"[{rank}, {in_f}] / [{out_f}, {rank}] (rank {rank}, base {[out_f, in_f]})"
        )
    return None


def _scale(cfg: Mapping[str, Any], module: str, rank: int) -> float:
    alpha = float(_pattern(cfg.get("alpha_pattern"), module, cfg["lora_alpha"]))
    return alpha / math.sqrt(rank) if cfg.get("use_rslora") else alpha / rank


def read_adapter(
    spec: AdapterSpec, model: Any, model_modules: Mapping[str, Any], problems: list[str]
) -> LoadedAdapter | None:
    """Read and validate one PEFT adapter directory; problems are appended, not raised."""
    from safetensors.torch import load_file

    from storage.errors import StorageError
    from storage.manifest import manifest_of_file

    path = Path(spec.path)
    local: list[str] = []
    cfg = _read_config(path, local)
    try:
        root = manifest_of_file(path / WEIGHTS_FILE).root
        tensors = load_file(path / WEIGHTS_FILE)
    except (OSError, StorageError) as exc:
        local.append(f"{WEIGHTS_FILE}: {exc}")
        tensors, root = {}, ""
    if root and spec.manifest_root is not None and root != spec.manifest_root:
        local.append(f"manifest root {root} != expected {spec.manifest_root}")
    modules = _modules_of(cfg, tensors, model, model_modules, local) if tensors and cfg else {}
    problems.extend(f"adapter {spec.name!r} ({path}): {p}" for p in local)
    if local:
        return None
    return LoadedAdapter(spec, cfg["r"], float(cfg["lora_alpha"]), root, tensors, modules)


def _modules_of(
    cfg: Mapping[str, Any],
    tensors: Mapping[str, Any],
    model: Any,
    model_modules: Mapping[str, Any],
    problems: list[str],
) -> dict[str, tuple[Any, Any, float]]:
    dtype, device = model.dtype, model.device
    out: dict[str, tuple[Any, Any, float]] = {}
    before = len(problems)
    for module, pair in _pair_tensors(tensors, problems).items():
        if set(pair) != {"A", "B"} or not isinstance(cfg.get("r"), int):
            continue
        rank = int(_pattern(cfg.get("rank_pattern"), module, cfg["r"]))
        problem = _check_module(model_modules, module, pair["A"], pair["B"], rank)
        if problem:
            problems.append(problem)
            continue
        a, b = (pair[k].to(device=device, dtype=dtype) for k in ("A", "B"))
        out[module] = (a, b, _scale(cfg, module, rank))
    return out if len(problems) == before else {}


# --------------------------------------------------------------------------- backbone


def _backbone_tensors(model: Any, backbone_dir: Path | None) -> dict[str, tuple[Any, str]]:
    """name -> (resident tensor, file dtype) under the names of the backbone's files."""
    from storage.manifest import read_header

    state = model.state_dict(keep_vars=True)
    if backbone_dir is None:  # a model passed in: its state dict, tied duplicates once
        seen: set[tuple[int, int]] = set()
        out = {}
        for name, t in state.items():
            key = (t.data_ptr(), t.numel())
            if key not in seen:
                seen.add(key)
                out[name] = (t, "")
        return out
    out, missing = {}, []
    for shard in sorted(backbone_dir.glob("*.safetensors")):
        for info in read_header(shard).tensors:
            if info.name in state:
                out[info.name] = (state[info.name], info.dtype)
            else:
                missing.append(info.name)
    if missing:
        raise BackboneLoadError(f"{backbone_dir}: file tensors not in the model: {missing[:5]}")
    return out


class PeftEngine(Engine):
    """Reference engine: all adapters resident, O(1) switches, per-config prefix caches."""

    def __init__(
        self,
        backbone: str | os.PathLike[str] | Any,
        adapters: Iterable[AdapterSpec] = (),
        device: str = "cpu",
        *,
        tokenizer: Any = None,
        backbone_root: str | None = None,
        cache_budget_bytes: int = DEFAULT_BUDGET_BYTES,
    ) -> None:
        from runtime.models import load_backbone, load_tokenizer

        if isinstance(backbone, str | os.PathLike):
            self.backbone_dir: Path | None = Path(backbone)
            self.model = load_backbone(self.backbone_dir, device)
            self.tokenizer = tokenizer or load_tokenizer(self.backbone_dir)
        else:
            self.backbone_dir = None
            self.model = backbone.to(device).eval().requires_grad_(False)
            self.tokenizer = tokenizer
        self.holder = ActiveConfig()
        self.cache_budget_bytes = cache_budget_bytes
        self._expected_backbone = backbone_root
        self._backbone = _backbone_tensors(self.model, self.backbone_dir)
        self._modules = dict(self.model.named_modules())
        self._hooks: dict[str, LoraHook] = {}
        self._loaded: dict[str, LoadedAdapter] = {}  # weight key -> adapter, resident
        self._library: dict[str, str] = {}  # capability -> weight key, for new sessions
        self._sessions: weakref.WeakSet[PeftSession] = weakref.WeakSet()
        self._forward_lock = threading.Lock()
        self._idle = threading.Condition()
        self._foreground = 0  # generate calls in progress, on any session
        self.epoch = 0  # foreground calls started so far: a prefetch stops when it moves
        self.vocab_size = int(self.model.get_input_embeddings().num_embeddings)
        self.add_adapters(adapters)

    @property
    def adapters(self) -> Mapping[str, AdapterSpec]:
        """The current library: capability -> spec (what new sessions get)."""
        return {name: self._loaded[key].spec for name, key in self._library.items()}

    def add_adapters(self, specs: Iterable[AdapterSpec], replace: bool = False) -> None:
        """Validate every adapter first (one AdapterLoadError for all problems), then apply.

        Each adapter is resident under its weight key (`spec.version`, e.g. "write@7", else
        its name); a key never names two sets of weights. With `replace`, a capability of
        the library may get a new version: new sessions see it, open ones keep theirs.
        """
        specs = list(specs)
        problems = self._name_problems(specs, replace)
        fresh = [s for s in specs if weight_key(s) not in self._loaded]
        loaded = [read_adapter(s, self.model, self._modules, problems) for s in fresh]
        problems.extend(self._reuse_problems(specs))
        if problems:
            raise AdapterLoadError("; ".join(problems))
        for adapter in loaded:
            assert adapter is not None
            self._apply(adapter)
        self._library = {**self._library, **{s.name: weight_key(s) for s in specs}}

    def swap_adapters(self, specs: Iterable[AdapterSpec]) -> None:
        """Load new versions next to the old ones; new sessions use them (atomic)."""
        self.add_adapters(specs, replace=True)

    def _name_problems(self, specs: Sequence[AdapterSpec], replace: bool) -> list[str]:
        names = [s.name for s in specs]
        taken = set() if replace else set(self._library)
        problems = [
            f"adapter name {n!r} is used twice"
            for n in sorted({n for n in names if names.count(n) > 1 or n in taken})
        ]
        problems.extend(f"adapter name {n!r} is not valid" for n in names if not n)
        return problems

    def _reuse_problems(self, specs: Sequence[AdapterSpec]) -> list[str]:
        """A spec whose weight key is resident must carry the very same weights."""
        from storage.errors import StorageError
        from storage.manifest import manifest_of_file

        problems = []
        for spec in specs:
            known = self._loaded.get(weight_key(spec))
            if known is None:
                continue
            try:
                root = manifest_of_file(Path(spec.path) / WEIGHTS_FILE).root
            except (OSError, StorageError) as exc:
                problems.append(f"adapter {spec.name!r}: {exc}")
                continue
            if root != known.file_root or spec.manifest_root not in (None, root):
                problems.append(
                    f"{weight_key(spec)!r} already names weights {known.file_root}; "
                    "new weights need a new version name"
                )
        return problems

    def _apply(self, adapter: LoadedAdapter) -> None:
        key = weight_key(adapter.spec)
        for module, lora in adapter.modules.items():
            hook = self._hooks.get(module)
            if hook is None:
                hook = self._hooks[module] = LoraHook(self.holder)
                self._modules[module].register_forward_hook(hook)
            hook.weights[key] = lora
        self._loaded[key] = adapter
        logger.info("adapter %s resident as %s (rank %d)", adapter.spec.name, key, adapter.rank)

    def release_unused(self) -> list[str]:
        """Free resident versions that neither the library nor an open session uses."""
        used = set(self._library.values())
        for session in list(self._sessions):
            used.update(session.library.values())
        unused = sorted(set(self._loaded) - used)
        for key in unused:
            for hook in self._hooks.values():
                hook.weights.pop(key, None)
            del self._loaded[key]
        return unused

    def new_session(self) -> PeftSession:
        session = PeftSession(self, self.cache_budget_bytes)
        self._sessions.add(session)
        return session

    def run(
        self,
        config: Config,
        entry: CacheEntry,
        token_ids: Sequence[int],
        background_epoch: int | None = None,
    ) -> Any:
        """One forward pass of `token_ids` under `config`, extending `entry`.

        A background pass (`background_epoch` given) is skipped, returning None, when
        foreground work started after that epoch.
        """
        with self._forward_lock:
            if background_epoch is not None and (self.busy or self.epoch != background_epoch):
                return None
            self.holder.name = config
            return extend(self.model, entry, token_ids)

    @contextmanager
    def foreground(self) -> Iterator[None]:
        """Mark latency-critical work: background prefetches pause while any is running."""
        with self._idle:
            self._foreground += 1
            self.epoch += 1
        try:
            yield
        finally:
            with self._idle:
                self._foreground -= 1
                self._idle.notify_all()

    @property
    def busy(self) -> bool:
        return self._foreground > 0

    def backbone_expected_root(self) -> str | None:
        """The expected backbone root: given, or the files' manifest (computed once)."""
        if self._expected_backbone is None and self.backbone_dir is not None:
            from storage.manifest import manifest_of_path

            self._expected_backbone = manifest_of_path(self.backbone_dir).root
        return self._expected_backbone

    def audit(self) -> AuditReport:
        tensors = {
            name: (t if not dtype else t.to(torch_dtype(dtype)))
            for name, (t, dtype) in self._backbone.items()
        }
        backbone = manifest_of_resident(tensors).root
        label = {key: name for name, key in self._library.items()}  # library by capability
        loaded = {label.get(k, k): a for k, a in self._loaded.items()}
        adapters = {n: manifest_of_resident(a.tensors).root for n, a in loaded.items()}
        expected = {n: a.spec.manifest_root or a.file_root for n, a in loaded.items()}
        return audit_report(backbone, self.backbone_expected_root(), adapters, expected)


# --------------------------------------------------------------------------- sessions


@dataclass(frozen=True)
class Prefill:
    logits: Any
    tokens: int
    seconds: float
    rebuild_s: float


@dataclass(frozen=True)
class PrefetchRecord:
    config: Config
    tokens: int
    seconds: float


class PeftSession(EngineSession):
    """One episode: its active configuration, history and per-configuration prefix caches."""

    def __init__(self, engine: PeftEngine, cache_budget_bytes: int) -> None:
        self._engine = engine
        self._library = dict(engine._library)
        self._history: list[int] = []
        self._seen = 0  # history tokens that went through the model under any configuration
        self.rebuilt_tokens = 0  # history tokens re-processed under new weights by generate
        self.caches = PrefixCacheStore(cache_budget_bytes)
        self._locks: dict[Config, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self._prefetches: dict[Config, threading.Thread] = {}
        self.prefetched: list[PrefetchRecord] = []
        self._closed = False

    # -- configuration -------------------------------------------------------------------
    @property
    def library(self) -> Mapping[str, str]:
        """capability -> weight key, fixed for the episode."""
        return self._library

    # -- history -------------------------------------------------------------------------
    @property
    def history(self) -> Sequence[int]:
        return tuple(self._history)

    def append(self, token_ids: Sequence[int]) -> None:
        self._check_open()
        ids = list(token_ids)
        bad = [t for t in ids if type(t) is not int or not 0 <= t < self._engine.vocab_size]
        if bad:
            raise InvalidTokensError(
                f"token ids outside the vocabulary [0, {self._engine.vocab_size}): {bad[:5]}"
            )
        self._history.extend(ids)

    # -- forward passes ------------------------------------------------------------------
    def _key(self, config: Config) -> Config:
        return None if config is None else self._library[config]

    def _lock(self, config: Config) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(config, threading.Lock())

    def _feed(
        self, config: Config, entry: CacheEntry, end: int, chunk: int = PREFILL_CHUNK
    ) -> Prefill:
        """Extend `entry` to history[:end]; re-processing seen tokens counts as rebuild."""
        logits, tokens, seconds, rebuild_s = None, 0, 0.0, 0.0
        for lo, hi in _chunks(entry.length, min(self._seen, end), end, chunk):
            ext = self._engine.run(self._key(config), entry, self._history[lo:hi])
            logits, tokens, seconds = ext.logits, tokens + ext.tokens, seconds + ext.seconds
            if hi <= self._seen:
                rebuild_s += ext.seconds
                self.rebuilt_tokens += ext.tokens
        self._seen = max(self._seen, end)
        return Prefill(logits, tokens, seconds, rebuild_s)

    def next_logits(self) -> Any:
        """Logits of the next token under the active configuration (cache kept up to date)."""
        self._check_open()
        config = self._active
        with self._engine.foreground(), self._lock(config):
            entry = self.caches.checkout(config) or new_entry(self._engine.model)
            try:
                return self._prefill(config, entry).logits
            finally:
                self.caches.checkin(config, entry)

    def _prefill(self, config: Config, entry: CacheEntry) -> Prefill:
        end = len(self._history)
        if end == 0:
            raise InvalidTokensError("the history is empty: append a prompt before generating")
        crop(entry, end - 1)  # the last token is re-run when its logits are needed
        return self._feed(config, entry, end)

    def generate(
        self,
        max_new_tokens: int,
        stop_ids: Sequence[int] = (),
        on_token: Callable[[int], None] | None = None,
    ) -> GenerationResult:
        self._check_open()
        if max_new_tokens < 1:
            raise InvalidTokensError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        config = self._active
        with self._engine.foreground(), self._lock(config):
            entry = self.caches.checkout(config) or new_entry(self._engine.model)
            hit = min(entry.length, len(self._history) - 1)
            try:
                pre = self._prefill(config, entry)
                return self._decode(config, entry, pre, hit, max_new_tokens, stop_ids, on_token)
            finally:
                self.caches.checkin(config, entry)

    def _decode(
        self,
        config: Config,
        entry: CacheEntry,
        pre: Prefill,
        hit: int,
        max_new_tokens: int,
        stop_ids: Sequence[int],
        on_token: Callable[[int], None] | None,
    ) -> GenerationResult:
        stops, out, finish = set(stop_ids), [], "length"
        logits, decode_s = pre.logits, 0.0
        for i in range(max_new_tokens):
            token = int(logits.argmax())
            self._history.append(token)
            out.append(token)
            if on_token is not None:
                on_token(token)
            if token in stops:
                finish = "stop"
                break
            if i + 1 < max_new_tokens:
                ext = self._engine.run(self._key(config), entry, [token])
                logits, decode_s = ext.logits, decode_s + ext.seconds
        self._seen = max(self._seen, entry.length)
        text = self._decode_text(out)
        return GenerationResult(
            tuple(out), text, finish, pre.tokens, len(out), pre.seconds, decode_s,
            pre.rebuild_s, hit,
        )  # fmt: skip

    def _decode_text(self, ids: list[int]) -> str:
        tok = self._engine.tokenizer
        return tok.decode(ids, skip_special_tokens=False) if tok is not None else ""

    # -- prefetch ------------------------------------------------------------------------
    def prefetch(self, config: Config) -> None:
        self._check_open()
        if config is not None and config not in self.library:
            raise UnknownAdapterError(config, sorted(self.library))
        end, epoch = len(self._history), self._engine.epoch
        thread = threading.Thread(
            target=self._build, args=(config, end, epoch), name=f"prefetch-{config}", daemon=True
        )
        self._prefetches[config] = thread
        thread.start()

    def _build(self, config: Config, end: int, epoch: int) -> None:
        """Background: extend `config`'s cache to history[:end] until foreground work starts.

        A prefetch uses the window in which the engine has nothing latency-critical to do (an
        external tool call in flight). As soon as a generate starts on any session it stops
        after the current chunk and checks the partial cache in: a generate of `config`
        continues from it, and the next `prefetch` call picks up where it ended.
        """
        try:
            with self._lock(config):
                entry = self.caches.checkout(config) or new_entry(self._engine.model)
                try:
                    self._prefetch_chunks(config, entry, end, epoch)
                finally:
                    self.caches.checkin(config, entry)
        except Exception:  # a background thread has nobody to raise to
            logger.exception("prefetch of %s failed", config)

    def _prefetch_chunks(self, config: Config, entry: CacheEntry, end: int, epoch: int) -> None:
        tokens, seconds = 0, 0.0
        while entry.length < end:
            ids = self._history[entry.length : min(end, entry.length + PREFETCH_CHUNK)]
            ext = self._engine.run(self._key(config), entry, ids, background_epoch=epoch)
            if ext is None:
                break
            tokens, seconds = tokens + ext.tokens, seconds + ext.seconds
            self._seen = max(self._seen, entry.length)
        if tokens:
            self.prefetched.append(PrefetchRecord(config, tokens, seconds))

    def wait_prefetch(self, timeout: float | None = None) -> None:
        """Block until every started prefetch has finished (tests, benchmarks)."""
        for thread in list(self._prefetches.values()):
            thread.join(timeout)

    # -- lifecycle -----------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosedError("session is closed")

    def close(self) -> None:
        self._closed = True
        self.wait_prefetch()
        self.caches.clear()
        self._engine._sessions.discard(self)


def weight_key(spec: AdapterSpec) -> str:
    """What the LoRA layers know an adapter by: its version name, else its name."""
    return spec.version or spec.name


def _chunks(start: int, seen: int, end: int, chunk: int) -> list[tuple[int, int]]:
    """[start, end) cut at `seen` (rebuild vs new tokens) and into `chunk`-token pieces."""
    bounds = sorted({start, end, *range(start, end, chunk), max(start, min(seen, end))})
    return [(lo, hi) for lo, hi in zip(bounds, bounds[1:], strict=False) if hi > lo]
