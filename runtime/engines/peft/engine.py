"""`PeftEngine`: a transformers backbone with every adapter of a library resident.

Each targeted `nn.Linear` gets one `LoraHook`, installed once; a switch is one store into the
shared `ActiveConfig`. A batch of adapters is validated as a whole first (every problem of
every adapter collected into one AdapterLoadError) and only then applied. The original
tensors stay resident under their PEFT names so that the audit can recompute each adapter's
manifest root from memory.

Adapters are resident under their version name (`write@7`); a session pins the library it
started with, so `set_library` (exactly a channel revision's library) or `swap_adapters` (new
versions only) serves new episodes while running ones finish on theirs, and `release_unused`
then frees versions nobody uses. The engine sets the
holder to a session's configuration inside one lock around every forward pass, so concurrent
sessions interleave safely token by token.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from runtime.audit import audit_report, manifest_of_resident, torch_dtype
from runtime.engine import AdapterSpec, AuditReport, Config, Engine
from runtime.engines.peft.adapters import (
    WEIGHTS_FILE,
    LoadedAdapter,
    linear_shapes,
    read_adapter,
    weight_key,
)
from runtime.engines.peft.backbone import backbone_tensors
from runtime.engines.peft.hook import ActiveConfig, LoraHook
from runtime.engines.peft.session import PeftSession
from runtime.errors import AdapterLoadError
from runtime.kvcache import DEFAULT_BUDGET_BYTES, CacheEntry, extend, score_after

logger = logging.getLogger(__name__)


class PeftEngine(Engine):
    """Reference engine: all adapters resident, O(1) switches, per-config prefix caches."""

    follows_channels = True

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
        self._backbone = backbone_tensors(self.model, self.backbone_dir)
        self._modules = dict(self.model.named_modules())
        self._linear_shapes = linear_shapes(self._modules)
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
        specs = self._load(specs, replace)
        self._library = {**self._library, **{s.name: weight_key(s) for s in specs}}

    def swap_adapters(self, specs: Iterable[AdapterSpec]) -> None:
        """Load new versions next to the old ones; new sessions use them (atomic)."""
        self.add_adapters(specs, replace=True)

    def set_library(self, specs: Iterable[AdapterSpec]) -> None:
        """Make the library of new sessions exactly `specs` (atomic): new versions load next
        to the old ones, a capability not in `specs` is no longer offered; open sessions keep
        theirs until `release_unused` frees what nobody uses."""
        specs = self._load(specs, replace=True)
        self._library = {s.name: weight_key(s) for s in specs}

    def _load(self, specs: Iterable[AdapterSpec], replace: bool) -> list[AdapterSpec]:
        """Validate every spec (one AdapterLoadError for all problems), then make the new
        ones resident; the library is not touched."""
        specs = list(specs)
        problems = self._name_problems(specs, replace)
        fresh = [s for s in specs if weight_key(s) not in self._loaded]
        loaded = [read_adapter(s, self.model, self._linear_shapes, problems) for s in fresh]
        problems.extend(self._reuse_problems(specs))
        if problems:
            raise AdapterLoadError("; ".join(problems), problems)
        for adapter in loaded:
            assert adapter is not None
            self._apply(adapter)
        return specs

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
        """A spec whose weight key is resident must carry the very same weights.

        With the expected root given (a registry's spec), it is compared with the root the
        resident tensors were verified to have when they loaded: the file is not read (what
        serves is memory, which the audit checks). Without one, the file's root is computed.
        """
        from storage.errors import StorageError
        from storage.manifest import manifest_of_file

        problems = []
        for spec in specs:
            known = self._loaded.get(weight_key(spec))
            if known is None:
                continue
            root = spec.manifest_root
            if root is None:
                try:
                    root = manifest_of_file(Path(spec.path) / WEIGHTS_FILE).root
                except (OSError, StorageError) as exc:
                    problems.append(f"adapter {spec.name!r}: {exc}")
                    continue
            if root != known.file_root:
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

    def score(
        self,
        config: Config,
        base: CacheEntry,
        base_ids: Sequence[int],
        context: Sequence[int],
        wanted: Mapping[tuple[int, ...], Sequence[int]],
    ) -> tuple[dict[tuple[int, ...], dict[int, float]], int, int]:
        """`kvcache.score_after` under `config` (next-token log-probabilities after
        `context` and each prefix of `wanted`, `base` left as it is), in the forward lock."""
        with self._forward_lock:
            self.holder.name = config
            return score_after(self.model, base, base_ids, context, wanted)

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
