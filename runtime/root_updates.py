"""A node's root of trust that follows the rotations its registry serves (TUF's root update).

A node started with `--root root.json` trusts that file. When the registry serves a newer
version (`GET /v1/trust`, then `GET /v1/trust/root?version=N` for each version after the
node's), the node accepts version N+1 only when it is signed by the admin threshold of
version N, the one it trusts, and by its own (`TrustRoot.verify`, python-tuf's
`Root.get_root_verification_result`): the registry cannot hand it a root of its own. Each
accepted version is written to the node's state directory (`N.root.json`), so a restart
with the same `--root` resumes from the newest (each file verified again in order); from
then on, signatures by keys the new version removed stop counting. A version that fails is
refused with `UntrustedError` naming it: the node installs nothing new and says why.

    chain = RootChain.open(Path("root.json"), library_dir / ".weact-trust")
    root = chain.refresh(client)          # the newest root it could verify
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Protocol

from registry.errors import InvalidError, UntrustedError
from registry.trust import TrustRoot

logger = logging.getLogger(__name__)

MAX_ROTATIONS = 32  # versions accepted in one refresh (TUF clients bound this too)


class TrustSource(Protocol):
    """The registry calls a `RootChain` makes (RegistryClient implements them)."""

    def get_trust(self) -> dict[str, Any]: ...

    def get_trust_root(self, version: int | None = None) -> dict[str, Any]: ...


class RootChain:
    """The root a node trusts now, and where it keeps the versions it accepted since."""

    def __init__(self, root: TrustRoot, state_dir: Path | None = None) -> None:
        self.root = root
        self.state_dir = state_dir

    @classmethod
    def open(cls, path: Path, state_dir: Path | None) -> RootChain:
        """The root in `path` (verified), moved on through the versions accepted earlier and
        kept in `state_dir` that still verify from it."""
        chain = cls(TrustRoot.load(path), state_dir)
        while state_dir is not None:
            saved = state_dir / f"{chain.root.version + 1}.root.json"
            if not saved.is_file():
                break
            try:
                chain._accept(TrustRoot.from_bytes(saved.read_bytes(), label=str(saved)))
            except (UntrustedError, InvalidError) as exc:  # another chain, or tampered with
                logger.warning("ignoring %s: %s", saved, exc)
                break
        return chain

    def refresh(self, source: TrustSource) -> TrustRoot:
        """Accept the versions the registry serves after ours, each verified against the one
        before; `UntrustedError` (nothing more accepted) for the first that fails."""
        newest = (source.get_trust().get("root") or {}).get("version")
        for _ in range(MAX_ROTATIONS):
            if not isinstance(newest, int) or newest <= self.root.version:
                break
            version = self.root.version + 1
            label = f"root version {version} served by the registry"
            try:
                data = json.dumps(source.get_trust_root(version)).encode()
                self._accept(TrustRoot.from_bytes(data, label=label))
            except (UntrustedError, InvalidError) as exc:
                raise UntrustedError(
                    f"refused {label} (still trusting version {self.root.version}): {exc}"
                ) from exc
            self._persist()
            logger.warning("root of trust rotated to version %d", self.root.version)
        return self.root

    def _accept(self, candidate: TrustRoot) -> None:
        candidate.verify(self.root)  # the next version, signed by our admin threshold and its own
        self.root = candidate

    def _persist(self) -> None:
        if self.state_dir is None:
            return
        self.state_dir.mkdir(parents=True, exist_ok=True)
        path = self.state_dir / f"{self.root.version}.root.json"
        tmp = path.with_name(f".{path.name}.tmp")
        self.root.save(tmp)
        os.replace(tmp, path)
