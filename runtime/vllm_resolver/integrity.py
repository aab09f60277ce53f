"""Integrity at every load: the tensors vLLM read from disk, checked before they are used.

vLLM reads an adapter's files each time it loads it into its CPU LoRA cache: on the first
request and again after every eviction (`--max-cpu-loras`, by default `--max-loras`), in the
engine process, in `WorkerLoRAManager._load_adapter` -> `LoRAModel.from_local_checkpoint`
-> `LoRAModel.from_lora_tensors(tensors=...)`. `install` wraps the first to arm a check for
registry versions (`capability@N`, the name the plugin registers every LoRA under) and the
last to recompute the manifest root of exactly the tensors vLLM is about to use (no
re-read of the file after the check) and compare it with the registry's root for that
version, fetched over HTTP on first use and kept in this process's memory (never from a
file on the server's disk). A load that did not pass through the check is refused too.

On a mismatch: logged, the copy deleted, an `integrity.refused` event reported to the
registry (`POST /v1/nodes/{id}/events`), the version pulled again (verified), and the load
retried once from the fresh copy; a second mismatch (or a version no longer servable)
fails the load, so the tampered bytes never answer.

With a root of trust (`WEACT_ROOT`, `trust.Trust`) the registry's root for a version counts
only once the root's keys are found to have signed the version (checked on first use in
this process), and a copy is pulled again from that signed record, never from a record the
registry serves later.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from registry.client import Adapter, RegistryClient
from registry.errors import RegistryError, UntrustedError
from runtime.sync import pull_entry
from runtime.vllm_resolver.log import get_logger
from runtime.vllm_resolver.names import VersionName, parse_name
from runtime.vllm_resolver.policy import CandidateMode, refusal
from runtime.vllm_resolver.source import entry_of, find_version
from runtime.vllm_resolver.trust import Trust

logger = get_logger(__name__)
T = TypeVar("T")
_armed = threading.local()  # .version: the version whose tensors the next load must match


class IntegrityRefused(RuntimeError):
    """Weights read from disk whose manifest root is not the registry's."""


class LoadVerifier:
    """Checks every load of a registry version against the registry's manifest root."""

    def __init__(
        self,
        client: Callable[[], RegistryClient],
        library_dir: Path,
        node_id: str,
        mode: CandidateMode = "no",
        trust: Trust | None = None,
    ) -> None:
        self.client = client  # one per process
        self.library_dir = Path(library_dir)
        self.node_id = node_id
        self.mode = mode
        self.trust = trust or Trust(client, None)
        self._adapters: dict[str, Adapter] = {}  # version -> record; roots never change
        self._lock = threading.Lock()

    def expected(self, version: str) -> Adapter:
        with self._lock:
            if version not in self._adapters:
                parsed = parse_name(version)
                assert isinstance(parsed, VersionName)
                record = find_version(self.client(), parsed.capability, parsed.version)
                try:
                    self.trust.version(record)  # with a root: signed, or refused
                except UntrustedError as exc:
                    raise IntegrityRefused(str(exc)) from exc
                self._adapters[version] = record
            return self._adapters[version]

    def check(self, version: str, tensors: Mapping[str, Any]) -> str:
        """The root of `tensors`; IntegrityRefused unless it is the registry's for `version`."""
        from runtime.audit import manifest_of_resident

        root = manifest_of_resident(tensors).root
        want = self.expected(version)["manifest_root"]
        if root != want:
            raise IntegrityRefused(f"{version}: weights read have root {root}, registry's {want}")
        return root

    def load(self, version: str, path: str, load: Callable[[], T]) -> T:
        """`load()` with the check armed; on a mismatch refuse, report, re-pull, retry once."""
        try:
            return self._armed_load(version, load)
        except IntegrityRefused as exc:
            logger.error("refusing weights of %s read from %s: %s", version, path, exc)
            self._discard(version, path)
            self._report(version, f"{exc} (at {path}; copy deleted, pulling again)")
            self._pull(version)
            logger.warning("%s pulled again from the registry, verified; loading it", version)
            return self._armed_load(version, load)

    def _armed_load(self, version: str, load: Callable[[], T]) -> T:
        _armed.version, _armed.checked = version, False
        try:
            result = load()
        finally:
            checked = getattr(_armed, "checked", False)
            _armed.version = None
        if not checked:
            raise IntegrityRefused(f"{version}: vLLM loaded tensors the check never saw")
        return result

    def on_tensors(self, tensors: Mapping[str, Any] | None) -> None:
        """Called with the tensors of every LoRA vLLM builds; checks an armed load's."""
        version = getattr(_armed, "version", None)
        if version is None:
            return
        if tensors is None:
            raise IntegrityRefused(f"{version}: vLLM built the LoRA from tensors not shown")
        root = self.check(version, tensors)
        _armed.checked = True
        logger.info("%s: weights read from disk verified (root %s)", version, root[:16])

    def _own_copy(self, version: str, path: str) -> Path | None:
        target = (self.library_dir / version).resolve()
        return target if Path(path).resolve() == target else None

    def _discard(self, version: str, path: str) -> None:
        target = self._own_copy(version, path)
        if target is None:
            raise IntegrityRefused(f"{version} was loaded from {path}, not the plugin's library")
        shutil.rmtree(target, ignore_errors=True)

    def _report(self, version: str, detail: str) -> None:
        try:
            self.client().report_node_event(
                self.node_id, kind="integrity.refused", adapter=version, detail=detail
            )
        except RegistryError as exc:
            logger.warning("could not report the refused load of %s: %s", version, exc)

    def _pull(self, version: str) -> None:
        record = self.expected(version)
        try:
            fresh = self.client().get_adapter(record["id"])
        except RegistryError as exc:
            raise IntegrityRefused(f"{version}: cannot pull it again: {exc}") from exc
        if why := refusal(version, fresh["state"], self.mode):
            raise IntegrityRefused(f"{version}: not pulled again: {why}")
        signed = self.trust.root is not None  # then only the record whose signature passed
        pull_entry(self.client(), entry_of(record if signed else fresh), self.library_dir)


def install(verifier: LoadVerifier) -> None:
    """Wrap vLLM's LoRA loading in this (engine) process; idempotent."""
    from vllm.lora.lora_model import LoRAModel
    from vllm.lora.worker_manager import WorkerLoRAManager

    if getattr(WorkerLoRAManager, "_weact_verified", False):
        return
    load_adapter = WorkerLoRAManager._load_adapter
    from_tensors = LoRAModel.from_lora_tensors.__func__

    def _load_adapter(self: Any, lora_request: Any) -> Any:
        name = lora_request.lora_name
        if not isinstance(parse_name(name), VersionName):
            return load_adapter(self, lora_request)
        path = str(lora_request.lora_path)
        return verifier.load(name, path, lambda: load_adapter(self, lora_request))

    def from_lora_tensors(cls: Any, *args: Any, **kwargs: Any) -> Any:
        verifier.on_tensors(kwargs.get("tensors"))
        return from_tensors(cls, *args, **kwargs)

    WorkerLoRAManager._load_adapter = _load_adapter
    LoRAModel.from_lora_tensors = classmethod(from_lora_tensors)
    WorkerLoRAManager._weact_verified = True
