"""`RegistryClient`: the registry's JSON endpoints plus the methods that move files.

Blobs are verified end to end: uploads name their sha256 (the server checks it while
streaming), downloads are hashed while they stream to a temporary file that is renamed into
place only when the digest matches, and `pull_adapter` assembles a PEFT directory in a
temporary folder that is renamed into place once every file is verified.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from registry import errors
from registry.client.endpoints import Endpoints
from registry.client.records import Adapter, TokenInfo
from registry.client.signing import approval_envelope, pushed_identity, signed_as_publisher
from registry.client.transfers import (
    CHUNK_SIZE,
    ProgressCallback,
    adapter_paths,
    read_chunks,
    sha256_of_file,
    staged_directory,
    verified,
    write_atomically,
)

if TYPE_CHECKING:  # securesystemslib imports boto3: 0.16 s on every weact command
    from securesystemslib.signer import Signer


class RegistryClient(Endpoints):
    """One method per endpoint of the registry API (docs/CONTRACTS.md section 2), and
    verified transfers of blobs and PEFT adapter directories.

        with RegistryClient("http://127.0.0.1:8000", token) as client:
            adapter = client.push_adapter("./write-lora", capability="write")
            client.pull_adapter(adapter["id"], "./write-copy")

    Every failure is a typed `registry.errors.RegistryError`: an error answer becomes the
    class of its code, no answer `RegistryUnavailableError` / `RegistryTimeoutError`.
    """

    # -- blobs -------------------------------------------------------------------------

    def upload_blob(
        self, path: str | os.PathLike[str], progress: ProgressCallback | None = None
    ) -> str:
        """Stream a file to `PUT /v1/blobs/{sha256}` and return its digest."""
        digest = sha256_of_file(path)
        size = os.path.getsize(path)
        self._transport.request(
            "PUT",
            f"/blobs/{digest}",
            content=read_chunks(path, size, progress),
            headers={"Content-Length": str(size), "Content-Type": "application/octet-stream"},
        )
        return digest

    def upload_bytes(self, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        self._transport.request("PUT", f"/blobs/{digest}", content=data)
        return digest

    def blob_exists(self, digest: str) -> bool:
        response = self._transport.request("HEAD", f"/blobs/{digest}", answers=(404,))
        return response.status_code != 404

    def download_blob(
        self,
        digest: str,
        dest: str | os.PathLike[str],
        progress: ProgressCallback | None = None,
    ) -> Path:
        """Write blob `digest` to `dest`, verified while it streams; follows a 307 to S3.

        The bytes go to a temporary file beside `dest`, renamed into place only when their
        sha256 matches; on a mismatch nothing is left behind and `DigestMismatchError` is
        raised.
        """
        with self._transport.stream(f"/blobs/{digest}") as body:
            chunks = verified(digest, body.chunks(CHUNK_SIZE), body.size, progress)
            return write_atomically(Path(dest), chunks)

    def get_blob(self, digest: str) -> bytes:
        """A (small) blob's bytes, verified against its digest."""
        with self._transport.stream(f"/blobs/{digest}") as body:
            return b"".join(verified(digest, body.chunks(CHUNK_SIZE), body.size, None))

    # -- adapters as PEFT directories ----------------------------------------------

    def push_adapter(
        self,
        directory: str | os.PathLike[str],
        *,
        capability: str,
        backbone: str | None = None,
        parent_id: int | None = None,
        label: str | None = None,
        provenance: Mapping[str, Any] | None = None,
        progress: ProgressCallback | None = None,
        tags: Mapping[str, str] | None = None,
        signer: Signer | None = None,
    ) -> Adapter:
        """Upload a PEFT directory's files and register them as a new adapter version: its
        two PEFT files, and its `README.md` (model card) and `training.json` when present.
        With `signer` (a publisher's key), the version's identity is signed here and the
        signature registered with it (registry.trust).

        `backbone` is the backbone's manifest root; when omitted, the registry's only
        backbone is used (several backbones make it required). Bytes a version already has
        are `ConflictError` naming it (`detail["adapter_id"]`).
        """
        paths = adapter_paths(Path(directory))
        root = backbone or self._only_backbone_root()
        files = {name: self.upload_blob(path, progress) for name, path in paths.items()}
        signature = None
        if signer is not None:
            identity = pushed_identity(
                self,
                Path(directory),
                capability=capability,
                backbone_root=root,
                parent_id=parent_id,
                files=files,
            )
            signature = signed_as_publisher(identity, signer)
        return self.register_adapter(
            capability=capability,
            backbone=root,
            files=files,
            parent_id=parent_id,
            label=label,
            provenance=provenance,
            tags=tags,
            signature=signature,
        )

    def sign_approval(self, adapter_id: int, signer: Signer) -> dict[str, Any]:
        """Sign the version's identity as an approver and store the signature."""
        envelope = approval_envelope(self, adapter_id, signer)
        return self.add_signature(adapter_id, envelope)

    def _only_backbone_root(self) -> str:
        backbones = self.list_backbones()
        if len(backbones) != 1:
            raise errors.InvalidError(
                f"the registry has {len(backbones)} backbones: name one (its manifest root)"
            )
        return backbones[0]["root"]

    def pull_adapter(
        self,
        adapter_id: int,
        to_dir: str | os.PathLike[str],
        progress: ProgressCallback | None = None,
    ) -> Path:
        """Download an adapter version as a standard PEFT directory, verified, atomically.

        The files are fetched into a temporary folder beside `to_dir` and checked against
        their blob digests, then the folder is renamed to `to_dir`, which must not exist or
        be empty. On any failure `to_dir` is left as it was.
        """
        adapter = self.get_adapter(adapter_id)
        return self.pull_files(adapter["files"], to_dir, progress)

    def pull_files(
        self,
        files: Mapping[str, str],
        to_dir: str | os.PathLike[str],
        progress: ProgressCallback | None = None,
    ) -> Path:
        """Download the blobs `files` names (file name -> digest) into `to_dir`, atomically.

        Each file is verified against its digest while it streams (nothing hashes it again:
        a file in place is one whose bytes matched); `to_dir` must not exist or be empty, and
        is left as it was on any failure.
        """
        target = Path(to_dir)
        with staged_directory(target) as staging:
            for name, digest in sorted(files.items()):  # the card, training.json too
                if name in (".", "..") or Path(name).name != name or "\\" in name:
                    raise errors.UnexpectedResponseError(f"adapter file name {name!r}")
                self.download_blob(digest, staging / name, progress)
        return target

    # -- tokens and tags (admin, publisher) ---------------------------------------

    def list_tokens(self) -> list[TokenInfo]:
        """The tokens that are not revoked (admin): id, name, role, created; no secrets."""
        return cast(list[TokenInfo], self._get("/tokens"))

    def revoke_token(self, token_id: int) -> TokenInfo:
        """Revoke a token (admin); refused from its next request on."""
        return cast(TokenInfo, self._post(f"/tokens/{token_id}/revoke", {}))

    def tag_adapter(
        self,
        adapter_id: int,
        put: Mapping[str, str] | None = None,
        remove: Sequence[str] = (),
    ) -> Adapter:
        """Set `put` and remove the keys `remove` among a version's tags."""
        body = {"set": dict(put or {}), "remove": list(remove)}
        return cast(Adapter, self._post(f"/adapters/{adapter_id}/tags", body))
