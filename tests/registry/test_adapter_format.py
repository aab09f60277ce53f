"""One adapter format: the registry, the reference engine and the merges give one verdict.

Every variant of a corpus of adapter directories (built from a PEFT-saved adapter of the
tiny model by changing its config and, where a variant needs it, its tensors) goes through

- the registry: blobs PUT and `POST /v1/adapters` over real HTTP to `weact serve`;
- the reference engine: `PeftEngine.add_adapters` on the tiny backbone;
- the merges: `merge_adapters` (linear) of the adapter with itself;

and must be accepted by all three, or refused by all three with the same problems. Accepted
variants must also compute what PEFT computes. Hostile configs get a 4xx within seconds while
`/v1/healthz` keeps answering.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.serving import registry_in_process

from storage import manifest_of_path
from storage.errors import AdapterFormatError

CONFIG, WEIGHTS = "adapter_config.json", "adapter_model.safetensors"
WEACT = Path(sys.executable).with_name("weact")
Verdict = tuple[str, tuple[str, ...]]
ACCEPT: Verdict = ("accept", ())


# -- the corpus ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    name: str
    config: dict[str, Any] = field(default_factory=dict)  # merged into the PEFT-saved config
    drop: tuple[str, ...] = ()  # config keys removed
    text: Callable[[str], str] | None = None  # rewrites the JSON text (NaN, duplicates, ...)
    ranks: dict[str, int] = field(default_factory=dict)  # module regex (test side) -> rank
    tensors: Callable[[dict[str, Any]], None] | None = None
    expect: str | None = None  # None: accepted; else a text one of the problems contains


def _drop_b(weights: dict[str, Any]) -> None:
    del weights["base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight"]


def _magnitude(weights: dict[str, Any]) -> None:
    import torch

    weights["base_model.model.model.layers.0.self_attn.q_proj.lora_magnitude_vector"] = torch.ones(
        4
    )


CORPUS = [
    Variant("peft-saved"),
    Variant("rank-pattern", {"rank_pattern": {"v_proj": 2}}, ranks={r"v_proj$": 2}),
    Variant(
        "rank-pattern-regex",
        {"rank_pattern": {r"layers\.0\.self_attn\.(q|k)_proj": 2, "o_proj": 3}},
        ranks={r"layers\.0\.self_attn\.(q|k)_proj$": 2, r"o_proj$": 3},
    ),
    Variant("alpha-pattern", {"alpha_pattern": {"v_proj": 2, "layers.1.self_attn.q_proj": 32}}),
    Variant("rslora", {"use_rslora": True, "alpha_pattern": {"k_proj": 3}}),
    Variant("target-pattern", {"target_modules": r".*\.(q|k|v|o)_proj"}),
    Variant(
        "target-full-paths", {"target_modules": ["self_attn.q_proj", "k_proj", "v_proj", "o_proj"]}
    ),
    Variant("unknown-off", {"future_feature": None, "another_one": False, "more": []}),
    Variant("metadata", {"task_type": "CAUSAL_LM", "init_lora_weights": "gaussian"}),
    Variant("missing-alpha", drop=("lora_alpha",), expect="lora_alpha is required"),
    Variant("missing-targets", drop=("target_modules",), expect="target_modules must be"),
    Variant("dora", {"use_dora": True}, expect="use_dora=True is not supported"),
    Variant("fan-in-fan-out", {"fan_in_fan_out": True}, expect="fan_in_fan_out=True"),
    Variant("bias", {"bias": "lora_only"}, expect="bias='lora_only' is not supported"),
    Variant("modules-to-save", {"modules_to_save": ["lm_head"]}, expect="modules_to_save="),
    Variant("layers", {"layers_to_transform": [0]}, expect="layers_to_transform=[0]"),
    Variant("lora-bias", {"lora_bias": True}, expect="lora_bias=True"),
    Variant("pissa", {"init_lora_weights": "pissa"}, expect="init_lora_weights='pissa'"),
    Variant("unknown-on", {"future_feature": 1}, expect="unknown field future_feature=1"),
    Variant("r-string", {"r": "four"}, expect="r must be a positive integer"),
    Variant("r-huge", {"r": 10**30}, expect="r must be a positive integer (at most 65536)"),
    Variant("alpha-string", {"lora_alpha": "8"}, expect="lora_alpha must be a finite number"),
    Variant("alpha-nan", text=lambda t: _alpha(t, "NaN"), expect="lora_alpha holds NaN"),
    Variant("alpha-inf", text=lambda t: _alpha(t, "Infinity"), expect="lora_alpha holds NaN"),
    Variant("alpha-overflow", text=lambda t: _alpha(t, "1e999"), expect="lora_alpha holds NaN"),
    Variant("rslora-string", {"use_rslora": "yes"}, expect="use_rslora must be true or false"),
    Variant("peft-type", {"peft_type": "IA3"}, expect='peft_type must be "LORA"'),
    Variant("rank-pattern-not-applied", {"rank_pattern": {"v_proj": 2}}, expect="do not fit"),
    Variant("rank-pattern-zero", {"rank_pattern": {"v_proj": 0}}, expect="rank_pattern['v_proj']"),
    Variant("catastrophic-target", {"target_modules": "(.*)*y"}, expect="only as '.*'"),
    Variant("catastrophic-key", {"rank_pattern": {"(a+)+$": 2}}, expect="'+' is outside"),
    Variant("invalid-target", {"target_modules": "(q_proj"}, expect="unbalanced '('"),
    Variant("all-linear", {"target_modules": "all-linear"}, expect="training-time shorthand"),
    Variant("not-targeted", {"target_modules": ["q_proj", "v_proj"]}, expect="not among"),
    Variant("missing-b", tensors=_drop_b, expect="lora_A and lora_B must both be present"),
    Variant("extra-tensor", tensors=_magnitude, expect="lora_magnitude_vector"),
    Variant("duplicate-key", text=lambda t: '{"r": 8, ' + t[1:], expect="duplicate keys ['r']"),
    Variant("not-json", text=lambda t: t[:-1], expect="not valid JSON"),
]


def build(variant: Variant, base: Path, out: Path) -> Path:
    from safetensors.torch import load_file, save_file

    out.mkdir(parents=True)
    weights = load_file(base / WEIGHTS)
    for key in sorted(weights):
        for pattern, rank in variant.ranks.items():
            module = key.removeprefix("base_model.model.").rsplit(".lora_", 1)[0]
            if re.search(pattern, module):
                w = weights[key]
                weights[key] = (w[:rank] if ".lora_A." in key else w[:, :rank]).contiguous()
                break
    if variant.tensors is not None:
        variant.tensors(weights)
    save_file(weights, out / WEIGHTS, metadata={"format": "pt"})
    config = json.loads((base / CONFIG).read_text())
    config.update(variant.config)
    for key in variant.drop:
        del config[key]
    text = json.dumps(config)
    (out / CONFIG).write_text(text if variant.text is None else variant.text(text))
    return out


def _alpha(text: str, value: str) -> str:
    """The config with lora_alpha written as `value` (what json.dumps would not write)."""
    return re.sub(r'"lora_alpha": [^,}]+', f'"lora_alpha": {value}', text)


# -- the three readers ------------------------------------------------------------------------


@dataclass
class Registry:
    url: str
    admin: str
    publisher: str
    client: httpx.Client
    backbone: str = ""

    def auth(self, token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    def put(self, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        response = self.client.put(
            f"/v1/blobs/{digest}", content=data, headers=self.auth(self.publisher)
        )
        assert response.status_code in (200, 201), response.text
        return digest

    def post_adapter(self, config: bytes, weights: bytes) -> httpx.Response:
        files = {CONFIG: self.put(config), WEIGHTS: self.put(weights)}
        body = {
            "capability": "write",
            "backbone": self.backbone,
            "files": files,
            "provenance": {"data_digests": [], "capabilities": ["write"], "replay": False},
        }
        return self.client.post("/v1/adapters", json=body, headers=self.auth(self.publisher))

    def verdict(self, path: Path) -> Verdict:
        response = self.post_adapter((path / CONFIG).read_bytes(), (path / WEIGHTS).read_bytes())
        if response.status_code == 201:
            return ACCEPT
        assert response.status_code == 422, response.text
        body = response.json()
        assert body["error"] == "incompatible_adapter", body
        return "refuse", tuple(body["detail"]["problems"])


def _token(database_url: str, name: str, role: str, cwd: Path) -> str:
    done = subprocess.run(
        [str(WEACT), "token", "create", "--name", name, "--role", role,
         "--database-url", database_url, "--json"],
        capture_output=True, text=True, check=True, cwd=cwd,
        env={k: v for k, v in os.environ.items() if not k.startswith("WEACT_")},
    )  # fmt: skip
    return str(json.loads(done.stdout)["token"])


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from runtime.tiny import build_tiny_adapter, build_tiny_backbone

    backbone = build_tiny_backbone(tmp_path_factory.mktemp("backbone"))
    adapter = build_tiny_adapter(backbone, tmp_path_factory.mktemp("base") / "a", seed=3)
    return backbone, adapter


@pytest.fixture(scope="module")
def registry(
    tiny: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Registry]:
    workdir = tmp_path_factory.mktemp("serve")
    with (
        registry_in_process(workdir) as served,
        httpx.Client(base_url=served.url, timeout=30) as client,
    ):
        admin = _token(served.database_url, "root", "admin", workdir)
        publisher = _token(served.database_url, "alice", "publisher", workdir)
        reg = Registry(served.url, admin, publisher, client)
        manifest = manifest_of_path(tiny[0]).to_json()
        made = client.post(
            "/v1/backbones", json={"name": "tiny", "manifest": manifest}, headers=reg.auth(admin)
        )
        assert made.status_code == 201, made.text
        reg.backbone = made.json()["root"]
        cap = {"name": "write", "description": "writes", "order": None}
        assert client.post("/v1/capabilities", json=cap, headers=reg.auth(admin)).status_code == 201
        yield reg


@pytest.fixture(scope="module")
def engine(tiny: tuple[Path, Path]) -> Any:
    from runtime.engines.peft import PeftEngine

    return PeftEngine(tiny[0])


def engine_verdict(engine: Any, name: str, path: Path) -> Verdict:
    from runtime.engine import AdapterSpec
    from runtime.errors import AdapterLoadError

    try:
        engine.add_adapters([AdapterSpec(name, str(path))])
    except AdapterLoadError as exc:
        problems = exc.problems
    else:
        return ACCEPT
    prefix = f"adapter {name!r} ({path}): "  # the engine names the adapter it refuses
    assert all(p.startswith(prefix) for p in problems), problems
    return "refuse", tuple(p.removeprefix(prefix) for p in problems)


def vllm_fit_verdict(backbone: Path, path: Path) -> Verdict:
    """The vLLM engine's check (torch-free, against the backbone's safetensors headers)."""
    from runtime.engines.lora_fit import adapter_problems, backbone_shapes

    problems, _ = adapter_problems(path, backbone_shapes(backbone), max_rank=512)
    return ("refuse", tuple(problems)) if problems else ACCEPT


def merge_verdict(path: Path, out: Path) -> Verdict:
    from trainers.errors import MergeError
    from trainers.merge import MergeSpec, merge_adapters

    try:
        merge_adapters([path, path], out, MergeSpec("linear"))
    except MergeError as exc:
        cause = exc.__cause__
    else:
        return ACCEPT
    assert isinstance(cause, AdapterFormatError), cause
    return "refuse", tuple(cause.problems)


@pytest.mark.parametrize("variant", CORPUS, ids=[v.name for v in CORPUS])
def test_registry_engine_and_merges_agree(
    variant: Variant, tiny: tuple[Path, Path], registry: Registry, engine: Any, tmp_path: Path
) -> None:
    path = build(variant, tiny[1], tmp_path / variant.name)
    verdicts = {
        "registry": registry.verdict(path),
        "engine": engine_verdict(engine, variant.name, path),
        "vllm": vllm_fit_verdict(tiny[0], path),
        "merges": merge_verdict(path, tmp_path / "merged"),
    }
    assert len(set(verdicts.values())) == 1, verdicts
    kind, problems = verdicts["registry"]
    if variant.expect is None:
        assert kind == "accept", problems
        _computes_what_peft_computes(engine, variant.name, tiny[0], path)
    else:
        assert kind == "refuse"
        assert any(variant.expect in p for p in problems), problems


def _computes_what_peft_computes(engine: Any, name: str, backbone: Path, path: Path) -> None:
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # peft warns about the unknown (off) fields it drops
        ref = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(backbone), path)
    ids = torch.tensor([engine.tokenizer.encode("Step 1: find sources.")])
    with torch.inference_mode():
        engine.holder.name = name
        ours = engine.model(ids).logits
        engine.holder.name = None
        bare = engine.model(ids).logits
        theirs = ref.eval()(ids).logits
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=0)
    assert (ours - bare).abs().max() > 1e-3  # the adapter changes the output


# -- hostile configs over HTTP ------------------------------------------------------------------

# field -> (its value as JSON text, a text the refusal contains). The catastrophic patterns
# take re.fullmatch from seconds to forever on a name like model.layers.10.self_attn.q_proj.
HOSTILE = {
    "catastrophic-target": ("target_modules", '"(.*)*(.*)*(.*)*y"', "target_modules"),
    "catastrophic-alternation": ("target_modules", '"(.|.)*(.|.)*x"', "target_modules"),
    "catastrophic-word": ("target_modules", r'"(\\w+\\.?)+x"', "target_modules"),
    "catastrophic-key": ("rank_pattern", '{"(.*.*)*q_proj.x": 2}', "rank_pattern key"),
    "invalid-target": ("target_modules", '"(q_proj"', "unbalanced '('"),
    "invalid-key": ("rank_pattern", '{"[": 2}', "rank_pattern key"),
    "nan-alpha": ("lora_alpha", "NaN", "lora_alpha holds NaN"),
    "inf-alpha": ("lora_alpha", "-Infinity", "lora_alpha holds NaN"),
    "huge-rank": ("r", str(2**64), "r must be a positive integer"),
    "huge-pattern-rank": ("rank_pattern", json.dumps({"q_proj": 2**70}), "rank_pattern['q_proj']"),
    "huge-digits": ("r", "9" * 10_000, "not valid JSON"),
    "many-patterns": (
        "rank_pattern",
        json.dumps({f"(a|b){i}.*": 2 for i in range(9)}),
        "at most 8",
    ),
    "deep-nesting": ("extra", "[" * 50_000 + "]" * 50_000, "nested too deeply"),
    "oversized": ("extra", json.dumps("a" * (1024 * 1024)), "larger than 1048576 bytes"),
}


def _hostile_config(base: Path, key: str, value: str) -> bytes:
    config = json.loads((base / CONFIG).read_text())
    config.pop(key, None)
    return (json.dumps(config)[:-1] + f', "{key}": {value}}}').encode()


def test_hostile_configs_answer_4xx_fast_and_healthz_stays_up(
    registry: Registry, tiny: tuple[Path, Path]
) -> None:
    latencies: list[float] = []
    stop = threading.Event()

    def poll() -> None:
        with httpx.Client(base_url=registry.url, timeout=30) as client:
            while not stop.is_set():
                start = time.monotonic()
                assert client.get("/v1/healthz").status_code == 200
                latencies.append(time.monotonic() - start)
                time.sleep(0.02)

    weights = (tiny[1] / WEIGHTS).read_bytes()
    before = registry.client.get("/v1/adapters", headers=registry.auth(registry.admin)).json()[
        "total"
    ]
    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        for name, (key, value, needle) in HOSTILE.items():
            config = _hostile_config(tiny[1], key, value)
            start = time.monotonic()
            response = registry.post_adapter(config, weights)
            elapsed = time.monotonic() - start
            assert 400 <= response.status_code < 500, (name, response.status_code, response.text)
            body = response.json()
            assert body["error"] == "incompatible_adapter", (name, body)
            assert any(needle in p for p in body["detail"]["problems"]), (name, body)
            assert elapsed < 5, (name, elapsed)  # a hang guard: these take milliseconds
    finally:
        stop.set()
        poller.join(timeout=30)
    assert latencies, "healthz never answered"
    assert max(latencies) < 2, max(latencies)
    after = registry.client.get("/v1/adapters", headers=registry.auth(registry.admin)).json()[
        "total"
    ]
    assert after == before
