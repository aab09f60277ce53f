"""HTTP client of the registry REST API (`/v1`, docs/CONTRACTS.md section 2).

Runtime nodes, trainers and the `weact` CLI talk to the registry only through
`RegistryClient`. It imports nothing of the server (only `registry.errors`), so a node
installs it without FastAPI or SQLAlchemy. Responses come back as plain dicts typed with
`TypedDict`s; error responses come back as the typed errors of `registry.errors`, through
one function, `raise_for_error`.

Blobs are verified end to end: uploads name their sha256 (the server checks it while
streaming), downloads are hashed while they stream to a temporary file that is renamed into
place only when the digest matches, and `pull_adapter` assembles a PEFT directory in a
temporary folder that is renamed into place once every file is verified.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypedDict, cast

import httpx

from registry import errors

logger = logging.getLogger(__name__)

CHUNK_SIZE = 1024 * 1024
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")
"""The two files of a standard PEFT LoRA directory that the registry stores."""

ProgressCallback = Callable[[int, int], None]
"""Called with (bytes done, bytes total) as a transfer advances."""

State = Literal["candidate", "approved", "rejected", "revoked"]


class Backbone(TypedDict):
    id: int
    name: str
    root: str
    tensor_count: int
    param_count: int
    manifest_digest: str
    created_at: str


class Capability(TypedDict):
    name: str
    description: str
    order: int | None


class Adapter(TypedDict):
    id: int
    name: str
    capability: str
    backbone: str
    version: int
    label: str | None
    parent_id: int | None
    state: State
    rank: int
    alpha: float
    target_modules: list[str]
    files: dict[str, str]
    manifest_root: str
    provenance: dict[str, Any]
    created_by: str
    created_at: str


class AdapterPage(TypedDict):
    items: list[Adapter]
    total: int


class Lineage(TypedDict):
    ancestors: list[Adapter]
    adapter: Adapter
    descendants: list[Adapter]


class LibraryEntry(TypedDict):
    adapter_id: int
    name: str
    manifest_root: str
    files: dict[str, str]


class Revision(TypedDict):
    channel: str
    backbone: str
    revision: int
    library: dict[str, LibraryEntry]
    order: list[str]
    library_digest: str
    created_by: str
    created_at: str
    reason: str | None


class GateCheck(TypedDict):
    benchmark: str
    version: int
    scope: str
    baseline: float | None
    candidate: float | None
    delta: float | None
    tolerance: float
    verdict: Literal["pass", "fail", "missing", "no_baseline", "mismatch"]
    test: Literal["paired_bootstrap", "point"] | None
    n: int | None
    ci_low: float | None
    ci_high: float | None
    baseline_evaluation: int | None
    candidate_evaluation: int | None
    baseline_by: str | None
    candidate_by: str | None
    detail: str | None


class GateReport(TypedDict):
    passed: bool
    checks: list[GateCheck]
    library_digest: str | None
    baseline_library_digest: str | None
    seed: str | None
    resamples: int | None
    confidence: float | None


class PromoteResult(TypedDict):
    revision: Revision
    gate: GateReport


class Event(TypedDict):
    id: int
    actor: str
    action: str
    subject: str
    payload: dict[str, Any]
    created_at: str
    prev_hash: str
    hash: str


class EventsVerification(TypedDict):
    ok: bool
    count: int
    first_broken: int | None
    detail: str


class Token(TypedDict):
    id: int
    name: str
    role: str
    token: str


def raise_for_error(response: httpx.Response) -> None:
    """Raise the typed `registry.errors` error that an error response stands for.

    The class is chosen by the body's `"error"` code; a body without one (a proxy's error
    page, say) falls back to the first code of the HTTP status in the registry's table.
    """
    if response.status_code < 400:
        return
    code, detail = _parse_error_body(response)
    raise errors.error_for(code, detail)


def _parse_error_body(response: httpx.Response) -> tuple[str, Any]:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        return body["error"], body.get("detail")
    text = response.text.strip()[:500] or response.reason_phrase
    code = _CODE_OF_STATUS.get(response.status_code, "http_error")
    return code, f"HTTP {response.status_code}: {text}"


_CODE_OF_STATUS: dict[int, str] = {}
for _code, _status in errors.ERROR_CODE_TO_HTTP_STATUS.items():
    _CODE_OF_STATUS.setdefault(_status, _code)


def sha256_of_file(path: str | os.PathLike[str]) -> str:
    """sha256 (hex) of a file's bytes (as storage.digest does; the client imports no storage)."""
    with open(path, "rb", buffering=0) as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


class RegistryClient:
    """One method per endpoint of the registry API; see docs/CONTRACTS.md section 2."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        timeout: float = 30.0,
        *,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(
            base_url=f"{self.url}/v1",
            headers=headers,
            timeout=timeout,
            transport=transport,
            follow_redirects=False,
        )

    def __enter__(self) -> RegistryClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # -- plumbing ----------------------------------------------------------------------

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        response = self._http.request(method, path, **kwargs)
        raise_for_error(response)
        return response

    def _get(self, path: str, **params: Any) -> Any:
        clean = {key: value for key, value in params.items() if value is not None}
        return self._request("GET", path, params=clean).json()

    def _post(self, path: str, body: Mapping[str, Any]) -> Any:
        return self._request("POST", path, json=dict(body)).json()

    # -- service -----------------------------------------------------------------------

    def healthz(self) -> dict[str, str]:
        return cast(dict[str, str], self._get("/healthz"))

    def metrics(self) -> str:
        return self._request("GET", "/metrics").text

    def create_token(self, *, name: str, role: str) -> Token:
        return cast(Token, self._post("/tokens", {"name": name, "role": role}))

    # -- blobs -------------------------------------------------------------------------

    def upload_blob(
        self, path: str | os.PathLike[str], progress: ProgressCallback | None = None
    ) -> str:
        """Stream a file to `PUT /v1/blobs/{sha256}` and return its digest."""
        digest = sha256_of_file(path)
        size = os.path.getsize(path)
        self._request(
            "PUT",
            f"/blobs/{digest}",
            content=_read_chunks(path, size, progress),
            headers={"Content-Length": str(size), "Content-Type": "application/octet-stream"},
        )
        return digest

    def upload_bytes(self, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        self._request("PUT", f"/blobs/{digest}", content=data)
        return digest

    def blob_exists(self, digest: str) -> bool:
        response = self._http.request("HEAD", f"/blobs/{digest}")
        if response.status_code == 404:
            return False
        raise_for_error(response)
        return True

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
        target = Path(dest)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as out:
                for chunk in self._verified_chunks(digest, progress):
                    out.write(chunk)
            os.replace(tmp_name, target)
        except BaseException:
            Path(tmp_name).unlink(missing_ok=True)
            raise
        return target

    def get_blob(self, digest: str) -> bytes:
        """A (small) blob's bytes, verified against its digest."""
        return b"".join(self._verified_chunks(digest, None))

    def _verified_chunks(self, digest: str, progress: ProgressCallback | None) -> Iterator[bytes]:
        hasher = hashlib.sha256()
        with self._open_blob(digest) as response:
            total = int(response.headers.get("Content-Length", 0))
            done = 0
            try:
                for chunk in response.iter_bytes(CHUNK_SIZE):
                    hasher.update(chunk)
                    done += len(chunk)
                    if progress is not None:
                        progress(done, total)
                    yield chunk
            except httpx.TransportError as exc:
                raise errors.TransferError(
                    f"blob {digest}: transfer broke off after {done} bytes ({exc})"
                ) from exc
        actual = hasher.hexdigest()
        if actual != digest:
            raise errors.DigestMismatchError(f"blob {digest}: downloaded bytes hash to {actual}")

    def _open_blob(self, digest: str) -> _BlobStream:
        request = self._http.build_request("GET", f"/blobs/{digest}")
        response = self._http.send(request, stream=True)
        if response.status_code == 307:
            location = response.headers["Location"]
            response.close()
            # A presigned URL carries its own credentials: never send our bearer token there.
            plain = httpx.Client(timeout=self.timeout, follow_redirects=False)
            response = plain.send(plain.build_request("GET", location), stream=True)
            return _BlobStream(response, owner=plain)
        return _BlobStream(response, owner=None)

    # -- backbones and capabilities ----------------------------------------------------

    def register_backbone(self, *, name: str, manifest: Mapping[str, Any]) -> Backbone:
        return cast(Backbone, self._post("/backbones", {"name": name, "manifest": manifest}))

    def list_backbones(self) -> list[Backbone]:
        return cast(list[Backbone], self._get("/backbones"))

    def get_backbone(self, id_or_root: int | str) -> Backbone:
        return cast(Backbone, self._get(f"/backbones/{id_or_root}"))

    def create_capability(
        self, *, name: str, description: str, order: int | None = None
    ) -> Capability:
        body = {"name": name, "description": description, "order": order}
        return cast(Capability, self._post("/capabilities", body))

    def list_capabilities(self) -> list[Capability]:
        return cast(list[Capability], self._get("/capabilities"))

    def get_capability(self, name: str) -> Capability:
        return cast(Capability, self._get(f"/capabilities/{name}"))

    # -- adapters ----------------------------------------------------------------------

    def register_adapter(
        self,
        *,
        capability: str,
        backbone: str,
        files: Mapping[str, str],
        parent_id: int | None = None,
        label: str | None = None,
        provenance: Mapping[str, Any] | None = None,
    ) -> Adapter:
        """`POST /v1/adapters` for files already uploaded (digests by file name)."""
        body = {
            "capability": capability,
            "backbone": backbone,
            "parent_id": parent_id,
            "label": label,
            "files": dict(files),
            "provenance": _provenance(provenance),
        }
        return cast(Adapter, self._post("/adapters", body))

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
    ) -> Adapter:
        """Upload a PEFT directory's two files and register them as a new adapter version.

        `backbone` is the backbone's manifest root; when omitted, the registry's only
        backbone is used (several backbones make it required).
        """
        paths = _adapter_paths(Path(directory))
        root = backbone or self._only_backbone_root()
        files = {name: self.upload_blob(path, progress) for name, path in paths.items()}
        return self.register_adapter(
            capability=capability,
            backbone=root,
            files=files,
            parent_id=parent_id,
            label=label,
            provenance=provenance,
        )

    def _only_backbone_root(self) -> str:
        backbones = self.list_backbones()
        if len(backbones) != 1:
            raise errors.InvalidError(
                f"the registry has {len(backbones)} backbones: name one (its manifest root)"
            )
        return backbones[0]["root"]

    def list_adapters(
        self,
        *,
        capability: str | None = None,
        backbone: str | None = None,
        state: State | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> AdapterPage:
        page = self._get(
            "/adapters",
            capability=capability,
            backbone=backbone,
            state=state,
            limit=limit,
            offset=offset,
        )
        return cast(AdapterPage, page)

    def get_adapter(self, adapter_id: int) -> Adapter:
        return cast(Adapter, self._get(f"/adapters/{adapter_id}"))

    def lineage(self, adapter_id: int) -> Lineage:
        return cast(Lineage, self._get(f"/adapters/{adapter_id}/lineage"))

    def approve(self, adapter_id: int, reason: str | None = None) -> Adapter:
        return self._decide(adapter_id, "approve", reason)

    def reject(self, adapter_id: int, reason: str | None = None) -> Adapter:
        return self._decide(adapter_id, "reject", reason)

    def revoke(self, adapter_id: int, reason: str | None = None) -> Adapter:
        return self._decide(adapter_id, "revoke", reason)

    def _decide(self, adapter_id: int, verb: str, reason: str | None) -> Adapter:
        return cast(Adapter, self._post(f"/adapters/{adapter_id}/{verb}", {"reason": reason}))

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
        target = Path(to_dir)
        _check_free(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        try:
            for name in ADAPTER_FILES:
                self.download_blob(adapter["files"][name], staging / name, progress)
            _check_free(target)
            if target.exists():
                target.rmdir()
            staging.rename(target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return target

    # -- benchmarks and evaluations ----------------------------------------------------

    def create_benchmark(
        self,
        *,
        name: str,
        version: int,
        dataset_digest: str,
        scope: str,
        metric: str,
        direction: Literal["higher", "lower"],
        tolerance: float,
    ) -> dict[str, Any]:
        body = {
            "name": name,
            "version": version,
            "dataset_digest": dataset_digest,
            "scope": scope,
            "metric": metric,
            "direction": direction,
            "tolerance": tolerance,
        }
        return cast(dict[str, Any], self._post("/benchmarks", body))

    def create_evaluation(
        self,
        *,
        benchmark: str,
        benchmark_version: int,
        score: float,
        n: int,
        items_digest: str | None = None,
        library_digest: str | None = None,
        adapter_id: int | None = None,
        items: Mapping[str, float] | None = None,
        provenance: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Record a score for a library (by digest) or for one adapter version.

        `items` ({item id: score}, whose mean is `score`) lets the gate run its paired test;
        `provenance` says where the scores come from (dataset_digest, engine, policy,
        code_version, library, extra).
        """
        if (library_digest is None) == (adapter_id is None):
            raise errors.InvalidError("give exactly one of library_digest and adapter_id")
        body: dict[str, Any] = {
            "benchmark": benchmark,
            "benchmark_version": benchmark_version,
            "score": score,
            "n": n,
            "items_digest": items_digest,
        }
        if library_digest is not None:
            body["library_digest"] = library_digest
        else:
            body["adapter_id"] = adapter_id
        if items is not None:
            body["items"] = dict(items)
        if provenance is not None:
            body["provenance"] = dict(provenance)
        return cast(dict[str, Any], self._post("/evaluations", body))

    def get_evaluation(self, evaluation_id: int) -> dict[str, Any]:
        """One evaluation with its per-item scores (`items`) and provenance."""
        return cast(dict[str, Any], self._get(f"/evaluations/{evaluation_id}"))

    def list_benchmarks(self) -> list[dict[str, Any]]:
        return cast(list[dict[str, Any]], self._get("/benchmarks"))

    def list_evaluations(self, *, benchmark: str | None = None) -> list[dict[str, Any]]:
        return cast(list[dict[str, Any]], self._get("/evaluations", benchmark=benchmark))

    # -- channels ----------------------------------------------------------------------

    def list_channels(self) -> list[Revision]:
        return cast(list[Revision], self._get("/channels"))

    def get_channel(self, name: str) -> Revision:
        return cast(Revision, self._get(f"/channels/{name}"))

    def channel_revisions(self, name: str) -> list[Revision]:
        return cast(list[Revision], self._get(f"/channels/{name}/revisions"))

    def wait_for_channel(self, name: str, *, after: int, wait: float = 30.0) -> Revision | None:
        """Long-poll: the channel's revision once it passes `after`, or None after `wait` s."""
        response = self._http.get(
            f"/channels/{name}",
            params={"after": after, "wait": wait},
            timeout=wait + self.timeout,
        )
        if response.status_code == 304:
            return None
        raise_for_error(response)
        return cast(Revision, response.json())

    def gate(
        self,
        channel: str,
        adapters: Mapping[str, int | None],
        *,
        backbone: str | None = None,
        order: Sequence[str] | None = None,
        expected_revision: int | None = None,
    ) -> GateReport:
        """Dry run of a promotion: the gate report, nothing written."""
        body = _promote_request(adapters, backbone, order, expected_revision, None)
        return cast(GateReport, self._post(f"/channels/{channel}/gate", body))

    def promote(
        self,
        channel: str,
        adapters: Mapping[str, int | None],
        *,
        backbone: str | None = None,
        order: Sequence[str] | None = None,
        expected_revision: int | None = None,
        reason: str | None = None,
    ) -> PromoteResult:
        """Merge `adapters` into the channel's library as a new revision (gate first).

        `backbone` is needed for a new channel only when the adapters do not name one
        between them. A failed gate raises `GateFailedError` whose detail is the gate report.
        """
        body = _promote_request(adapters, backbone, order, expected_revision, reason)
        return cast(PromoteResult, self._post(f"/channels/{channel}/promote", body))

    def rollback(
        self,
        channel: str,
        *,
        to_revision: int,
        expected_revision: int | None = None,
        reason: str | None = None,
    ) -> Revision:
        body = {
            "to_revision": to_revision,
            "expected_revision": expected_revision,
            "reason": reason,
        }
        return cast(Revision, self._post(f"/channels/{channel}/rollback", body))

    # -- nodes and events --------------------------------------------------------------

    def heartbeat(
        self, node_id: str, *, channel: str, revision: int | None, audit: Mapping[str, Any]
    ) -> dict[str, Any]:
        body = {"channel": channel, "revision": revision, "audit": dict(audit)}
        return cast(dict[str, Any], self._post(f"/nodes/{node_id}/heartbeat", body))

    def list_nodes(self) -> list[dict[str, Any]]:
        return cast(list[dict[str, Any]], self._get("/nodes"))

    def list_events(self, *, after: int | None = None, limit: int | None = None) -> list[Event]:
        return cast(list[Event], self._get("/events", after=after, limit=limit))

    def verify_events(self) -> EventsVerification:
        return cast(EventsVerification, self._get("/events/verify"))


class _BlobStream:
    """A streamed blob response, closed (with its one-off client, if any) on exit."""

    def __init__(self, response: httpx.Response, owner: httpx.Client | None) -> None:
        self._response = response
        self._owner = owner

    def __enter__(self) -> httpx.Response:
        try:
            raise_for_error(_read_if_error(self._response))
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self._response

    def __exit__(self, *exc: object) -> None:
        self._response.close()
        if self._owner is not None:
            self._owner.close()


def _read_if_error(response: httpx.Response) -> httpx.Response:
    if response.status_code >= 400:
        response.read()
    return response


def _read_chunks(
    path: str | os.PathLike[str], size: int, progress: ProgressCallback | None
) -> Iterator[bytes]:
    done = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK_SIZE):
            done += len(chunk)
            if progress is not None:
                progress(done, size)
            yield chunk


def _adapter_paths(directory: Path) -> dict[str, Path]:
    paths = {name: directory / name for name in ADAPTER_FILES}
    missing = [name for name, path in paths.items() if not path.is_file()]
    if missing:
        raise errors.InvalidError(
            f"{directory} is not a PEFT adapter directory: missing {', '.join(missing)}"
        )
    return paths


def _check_free(target: Path) -> None:
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise FileExistsError(f"{target} exists and is not an empty directory")


def _provenance(provenance: Mapping[str, Any] | None) -> dict[str, Any]:
    base: dict[str, Any] = {
        "data_digests": [],
        "capabilities": [],
        "replay": False,
        "trainer": {},
        "seed": None,
        "code_version": None,
    }
    base.update(provenance or {})
    return base


def _promote_request(
    adapters: Mapping[str, int | None],
    backbone: str | None,
    order: Sequence[str] | None,
    expected_revision: int | None,
    reason: str | None,
) -> dict[str, Any]:
    return {
        "backbone": backbone,
        "adapters": dict(adapters),
        "order": list(order) if order is not None else None,
        "expected_revision": expected_revision,
        "reason": reason,
    }
