"""The registry as the LoRA source of a stock vLLM OpenAI server (a vLLM general plugin).

This package is the entry point `vllm.general_plugins:weact_registry`. With it installed,
a vLLM OpenAI server of the backbone, started as

    WEACT_VLLM_REGISTRY_URL=http://registry:8000 WEACT_VLLM_REGISTRY_TOKEN=<node token> \\
    VLLM_ALLOW_RUNTIME_LORA_UPDATING=true \\
    python -m vllm.entrypoints.openai.api_server --model ./backbone --enable-lora \\
        --max-lora-rank 64 --api-key <key for clients>

answers `"model": "write@7"` (a version) and `"model": "prod/write"` (channel prod's
current head for write) with exactly the weights the registry approved:

- **Serve policy** (`policy.py`): a version only while `approved` (not revoked, not
  rejected); a channel name only as that channel's current head. Candidates are served by
  version name only in evaluation mode, `WEACT_VLLM_SERVE_CANDIDATES=evaluation`, for an
  evaluator's server; off by default.
- **Follows the registry** (`follower.py`): long-polls the channels it serves and checks
  the versions it serves every second; a revoked, rejected or replaced binding leaves the
  server at once (requests in flight finish, the next request resolves again), and the
  files of revoked and rejected versions are deleted from the library.
- **Verified at every load** (`integrity.py`): each time vLLM reads an adapter from disk
  (first load, and again after every eviction from its CPU LoRA cache) the tensors read are
  checked against the registry's manifest root; a mismatch is refused, logged, reported to
  the registry (event `node.integrity.refused`), the copy deleted and pulled again.
- **No squatting** (`names.py`, `server.py`): `/v1/load_lora_adapter` refuses registry
  names and paths inside the plugin's library; only the plugin loads them. The resolver
  needs `VLLM_ALLOW_RUNTIME_LORA_UPDATING=true`, which opens that endpoint: without
  `--api-key` (or `VLLM_API_KEY`) the server refuses to start.
- **Signed trust** (`trust.py`): with a root of trust, `WEACT_ROOT=root.json` (the offline
  root nodes take as `--root`), a channel revision passes `runtime.trusted.verify_revision`
  before any adapter of it is made loadable, and a version name must carry a trusted
  publisher's and the channel's approvers' signatures; a revision that fails is refused,
  logged and said in the heartbeat, and the last verified one keeps serving. Without a root
  the registry's word is taken, as before.
- **Visible**: logs through vLLM's logger (`log.py`); heartbeats as node
  `WEACT_VLLM_NODE_ID` (default `vllm-<hostname>`), so `weact nodes` lists the server with
  the names it serves, their verified roots, its last check and whether it is stale.

The token must have the `node` role (`weact token create --role node --name NAME`): it reads
adapters and channels, heartbeats, and reports refused loads. Settings (`settings.py`):
`WEACT_VLLM_REGISTRY_URL` (else `WEACT_URL`), `WEACT_VLLM_REGISTRY_TOKEN` (else
`WEACT_TOKEN`), `WEACT_VLLM_LIBRARY_DIR` (default `~/.cache/weact/vllm-lora`),
`WEACT_VLLM_SERVE_CANDIDATES`, `WEACT_VLLM_NODE_ID`, `WEACT_VLLM_CHECK_S`,
`WEACT_VLLM_HEARTBEAT_S`, `WEACT_VLLM_CHANNEL` (the channel a heartbeat names when the
server serves no channel name, or several; with a root, the one channel served, whose
approvers every version needs), `WEACT_VLLM_ROOT` (else `WEACT_ROOT`). Without a registry
URL, or without runtime LoRA updating (vLLM never asks resolvers then), the plugin does
nothing.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable

from registry.client import RegistryClient
from runtime.vllm_resolver.settings import TRUE, PluginSettings, api_key_refusal

RESOLVER_NAME = "WeAct registry"
CHECKED = "WEACT_VLLM_API_KEY_CHECKED"  # set by the server process for its children


def process_client(settings: PluginSettings) -> Callable[[], RegistryClient]:
    """A registry client per process (vLLM forks its engine process after plugins load)."""
    clients: dict[int, RegistryClient] = {}
    lock = threading.Lock()
    url = settings.registry_url
    assert url is not None

    def client() -> RegistryClient:
        with lock:
            pid = os.getpid()
            if pid not in clients:
                clients.clear()
                clients[pid] = RegistryClient(url, settings.token())
            return clients[pid]

    return client


def register() -> None:
    """vLLM general-plugin entry point; runs in every vLLM process of the server."""
    settings = PluginSettings()
    updating = os.environ.get("VLLM_ALLOW_RUNTIME_LORA_UPDATING", "").lower() in TRUE
    if not settings.registry_url or not updating:
        return
    if os.environ.get(CHECKED) is None:  # the first process: the server's own command line
        if why := api_key_refusal(os.environ, sys.argv):
            raise SystemExit(why)
        os.environ[CHECKED] = "1"  # vLLM's helper processes have other command lines
    from vllm.lora.resolver import LoRAResolverRegistry

    from runtime.trusted import STATE_FILE, TrustState
    from runtime.vllm_resolver import follower, integrity, served, server, source, trust

    client = process_client(settings)
    mode, library = settings.serve_candidates, settings.library_dir
    root = settings.trust_root()
    state = TrustState.load(library / STATE_FILE) if root is not None else None
    signed = trust.Trust(client, root, settings.channel, state)
    integrity.install(integrity.LoadVerifier(client, library, settings.node_id, mode, signed))
    table = served.ServedTable()
    following: list[follower.ServedFollower] = []

    def start_following() -> None:
        follow = follower.ServedFollower(
            client, table, hooks.drop, mode=mode, library_dir=library,
            node_id=settings.node_id, channel=settings.channel, check_s=settings.check_s,
            wait_s=settings.wait_s, heartbeat_s=settings.heartbeat_s, loaded=hooks.loaded,
            trust=signed,
        )  # fmt: skip
        following.append(follow)
        follow.start()

    hooks = server.ServerHooks(library, start_following)
    server.install(hooks)
    resolver = server.make_resolver(source.RegistrySource(client(), library, mode, signed), table)
    LoRAResolverRegistry.register_resolver(RESOLVER_NAME, resolver)
