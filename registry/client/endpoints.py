"""The JSON endpoints of the registry API (docs/CONTRACTS.md section 2), one method each.

`Endpoints` (channels in `channels`, plumbing in `base`) is the base of `RegistryClient`,
which adds the methods that move files.
Answers come back as the plain dicts of `registry.client.records`; every failure, an error
answer or no answer at all, as a typed `registry.errors.RegistryError` (see `transport`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, cast
from urllib.parse import quote

from registry import errors
from registry.client.channels import ChannelEndpoints
from registry.client.records import (
    Adapter,
    AdapterPage,
    Backbone,
    Benchmark,
    Capability,
    Evaluation,
    EvaluationDetail,
    Event,
    EventsVerification,
    Health,
    Lineage,
    Node,
    State,
    TokenCreated,
)
from registry.client.transfers import provenance_body
from registry.client.transport import read_json
from registry.names import parse_adapter_ref

STATES_PER_REQUEST = 1000  # the registry's limit of ids per GET /adapters/states


class Endpoints(ChannelEndpoints):
    """One method per JSON endpoint of the registry API; see docs/CONTRACTS.md section 2.

    `url` is the registry's base URL (`http(s)://HOST[:PORT]`; `InvalidError` otherwise),
    `token` a bearer token, `timeout` seconds for each request (a long-poll adds its wait).
    """

    # -- service -----------------------------------------------------------------------

    def healthz(self) -> Health:
        return cast(Health, self._get("/healthz"))

    def metrics(self) -> str:
        return self._transport.request("GET", "/metrics").text

    def create_token(
        self, *, name: str, role: str, principal: str | None = None, node_id: str | None = None
    ) -> TokenCreated:
        """A new token (its secret is in the answer, once). `principal` defaults to `name`;
        a node token may be bound to its `node_id` up front (else to the first it reports as).
        """
        body: dict[str, Any] = {"name": name, "role": role}
        if principal is not None:
            body["principal"] = principal
        if node_id is not None:
            body["node_id"] = node_id
        return cast(TokenCreated, self._post("/tokens", body))

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
        tags: Mapping[str, str] | None = None,
        signature: Mapping[str, Any] | None = None,
    ) -> Adapter:
        """`POST /v1/adapters` for files already uploaded (digests by file name); with the
        publisher's `signature` (a DSSE envelope, registry.trust) when given.

        Bytes that a version of the capability already has are `ConflictError` whose
        detail names it (`adapter_id`, `name`): never a silent duplicate.
        """
        body = {
            "capability": capability,
            "backbone": backbone,
            "parent_id": parent_id,
            "label": label,
            "files": dict(files),
            "provenance": provenance_body(provenance),
            "tags": dict(tags or {}),
        }
        if signature is not None:
            body["signature"] = dict(signature)
        return cast(Adapter, self._post("/adapters", body))

    def add_signature(self, adapter_id: int, envelope: Mapping[str, Any]) -> dict[str, Any]:
        """Store a signature (DSSE envelope) of the version's identity."""
        body = {"envelope": dict(envelope)}
        return cast(dict[str, Any], self._post(f"/adapters/{adapter_id}/signatures", body))

    def list_signatures(self, adapter_id: int) -> list[dict[str, Any]]:
        """The signatures stored for a version (what counts is for a root to say)."""
        return cast(list[dict[str, Any]], self._get(f"/adapters/{adapter_id}/signatures")["items"])

    def get_trust(self) -> dict[str, Any]:
        """The registry's mode (strict or development) and the newest root version it serves."""
        return cast(dict[str, Any], self._get("/trust"))

    def get_trust_root(self, version: int | None = None) -> dict[str, Any]:
        """Root version `version` (the newest without it): TUF metadata, unverified here."""
        return cast(dict[str, Any], self._get("/trust/root", version=version))

    def publish_trust_root(self, metadata: Mapping[str, Any]) -> dict[str, Any]:
        """Publish the next root version (an admin; signed as TUF's rotation requires)."""
        return cast(dict[str, Any], self._post("/trust/root", {"metadata": dict(metadata)}))

    def list_adapters(
        self,
        *,
        capability: str | None = None,
        backbone: str | None = None,
        state: State | None = None,
        limit: int | None = None,
        offset: int | None = None,
        tags: Sequence[str] | None = None,
        label: str | None = None,
        parent_id: int | None = None,
        text: str | None = None,
        sort: str | None = None,
        after: int | None = None,
    ) -> AdapterPage:
        """Versions by capability, backbone, state, `KEY=VALUE` tags (all must match),
        label, parent and text in the model card; in `sort` order (oldest first by default).
        `after` (with the oldest or newest order): the versions past that id, so the next
        page starts after the last id of this one."""
        page = self._get(
            "/adapters",
            capability=capability,
            backbone=backbone,
            state=state,
            limit=limit,
            offset=offset,
            after=after,
            tag=list(tags) if tags else None,
            label=label,
            parent=parent_id,
            q=text,
            sort=sort,
        )
        return cast(AdapterPage, page)

    def get_adapter(self, adapter_id: int) -> Adapter:
        return cast(Adapter, self._get(f"/adapters/{adapter_id}"))

    def adapter_states(self, ids: Sequence[int]) -> dict[int, str]:
        """Id -> state of each of `ids` that names a version, 1,000 ids per request."""
        wanted, states = sorted(set(ids)), dict[int, str]()
        for start in range(0, len(wanted), STATES_PER_REQUEST):
            chunk = wanted[start : start + STATES_PER_REQUEST]
            answer = self._get("/adapters/states", id=chunk)
            states |= {int(s["id"]): str(s["state"]) for s in answer["states"]}
        return states

    def adapter_by_name(self, name: str, backbone: str | None = None) -> Adapter:
        """The version `name` means: `write@2`, or an id (`#6`, `6`)."""
        ref = parse_adapter_ref(name)  # a bad name fails here, before any request
        path = f"/adapters/by-name/{quote(str(ref), safe='@')}"
        return cast(Adapter, self._get(path, backbone=backbone))

    def resolve_adapter(self, name: str | int, backbone: str | None = None) -> int:
        """The id of the version `name` means (an id is asked for nothing)."""
        if isinstance(name, int):
            return name
        ref = parse_adapter_ref(name)
        return ref.id if ref.id is not None else self.adapter_by_name(name, backbone)["id"]

    def lineage(self, adapter_id: int) -> Lineage:
        return cast(Lineage, self._get(f"/adapters/{adapter_id}/lineage"))

    def approve(self, adapter_id: int, reason: str | None = None) -> Adapter:
        return self._decide(adapter_id, "approve", reason)

    def reject(self, adapter_id: int, reason: str | None = None) -> Adapter:
        return self._decide(adapter_id, "reject", reason)

    def revoke(self, adapter_id: int, reason: str | None = None) -> Adapter:
        return self._decide(adapter_id, "revoke", reason)

    def _decide(self, adapter_id: int, verb: str, reason: str | None) -> Adapter:
        path = f"/adapters/{adapter_id}/{verb}"
        response = self._transport.request("POST", path, json={"reason": reason})
        self.seen.saw_header(response)  # a revoke moves the heads of channels serving it
        return cast(Adapter, read_json(response))

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
    ) -> Benchmark:
        body = {
            "name": name,
            "version": version,
            "dataset_digest": dataset_digest,
            "scope": scope,
            "metric": metric,
            "direction": direction,
            "tolerance": tolerance,
        }
        return cast(Benchmark, self._post("/benchmarks", body))

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
    ) -> Evaluation:
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
        return cast(Evaluation, self._post("/evaluations", body))

    def get_evaluation(self, evaluation_id: int) -> EvaluationDetail:
        """One evaluation with its per-item scores (`items`) and provenance."""
        return cast(EvaluationDetail, self._get(f"/evaluations/{evaluation_id}"))

    def list_benchmarks(self) -> list[Benchmark]:
        return cast(list[Benchmark], self._get("/benchmarks"))

    def list_evaluations(self, *, benchmark: str | None = None) -> list[Evaluation]:
        return cast(list[Evaluation], self._get("/evaluations", benchmark=benchmark))

    # -- nodes and events --------------------------------------------------------------

    def heartbeat(
        self,
        node_id: str,
        *,
        channel: str,
        revision: int | None,
        audit: Mapping[str, Any],
        status: Mapping[str, Any] | None = None,
    ) -> Node:
        """Report what the node serves; `status`: `library_digest`, `stale`, `lag`,
        `heartbeat_s` (its interval: the registry calls it stale after 2 missed)."""
        body = {"channel": channel, "revision": revision, "audit": dict(audit), **(status or {})}
        return cast(Node, self._post(f"/nodes/{node_id}/heartbeat", body))

    def report_node_event(self, node_id: str, *, kind: str, adapter: str, detail: str) -> Event:
        """An audit event from the node itself (`integrity.refused`: weights failed at load)."""
        body = {"kind": kind, "adapter": adapter, "detail": detail}
        return cast(Event, self._post(f"/nodes/{node_id}/events", body))

    def rebind_node(self, node_id: str, token_id: int) -> dict[str, Any]:
        """Make node token `token_id` the owner of `node_id` (admin); the previous owner's
        token is revoked."""
        return cast(dict[str, Any], self._post(f"/nodes/{node_id}/rebind", {"token_id": token_id}))

    def list_nodes(self) -> list[Node]:
        return cast(list[Node], self._get("/nodes"))

    def list_events(self, *, after: int | None = None, limit: int | None = None) -> list[Event]:
        return cast(list[Event], self._get("/events", after=after, limit=limit))

    def verify_events(self) -> EventsVerification:
        return cast(EventsVerification, self._get("/events/verify"))
