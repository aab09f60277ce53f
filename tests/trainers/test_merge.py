"""Static merges: hand-computed examples, and merged adapters that PEFT loads."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from storage.errors import AdapterFormatError
from storage.lora import parse_config
from trainers import merge
from trainers.errors import MergeError


def _adapter(factors: dict[str, tuple[list, list]], scale: float, rank: int) -> merge.LoraAdapter:
    tensors = {m: (torch.tensor(a), torch.tensor(b), scale) for m, (a, b) in factors.items()}
    fields = {"peft_type": "LORA", "r": rank, "lora_alpha": scale * rank, "target_modules": ["m"]}
    return merge.LoraAdapter(Path("x"), parse_config(json.dumps(fields)), tensors)


def test_full_additive_is_the_exact_sum_of_deltas() -> None:
    # dW1 = 2 * [[2],[0]] @ [[1, 0]] = [[4, 0], [0, 0]];  dW2 = 1 * [[1],[1]] @ [[0, 1]]
    one = _adapter({"m": ([[1.0, 0.0]], [[2.0], [0.0]])}, scale=2.0, rank=1)
    two = _adapter({"m": ([[0.0, 1.0]], [[1.0], [1.0]])}, scale=1.0, rank=1)
    factors, rank = merge.merged_factors([one, two], merge.MergeSpec("linear"))
    a, b = factors["m"]
    assert rank == 2
    assert torch.equal(b @ a, torch.tensor([[4.0, 1.0], [0.0, 1.0]]))
    # peft's `linear` sums A's and B's: (B1 + B2)(A1 + A2) has cross terms, here [[3, 3], [1, 1]]
    naive = (torch.tensor([[2.0], [0.0]]) + torch.tensor([[1.0], [1.0]])) @ torch.tensor(
        [[1.0, 1.0]]
    )
    assert not torch.equal(b @ a, naive)


def test_weighted_full_additive() -> None:
    one = _adapter({"m": ([[1.0, 0.0]], [[2.0], [0.0]])}, scale=2.0, rank=1)
    two = _adapter({"m": ([[0.0, 1.0]], [[1.0], [1.0]])}, scale=1.0, rank=1)
    factors, _ = merge.merged_factors([one, two], merge.MergeSpec("linear", weights=(0.5, -1)))
    a, b = factors["m"]
    assert torch.equal(b @ a, torch.tensor([[2.0, -1.0], [0.0, -1.0]]))


def test_ties_hand_computed() -> None:
    d1 = torch.tensor([[1.0, -2.0], [3.0, 0.5]])
    d2 = torch.tensor([[-1.0, 1.0], [2.0, -4.0]])
    # trim to 2 of 4: d1 -> [[0,-2],[3,0]], d2 -> [[0,0],[2,-4]]; signs of the sum: + - + -
    # disjoint mean: [[0, -2], [(3 + 2) / 2, -4]]
    got = merge.ties([d1, d2], [1.0, 1.0], density=0.5)
    assert torch.equal(got, torch.tensor([[0.0, -2.0], [2.5, -4.0]]))
    weighted = merge.ties([d1, d2], [2.0, 1.0], density=0.5)
    assert torch.equal(weighted, torch.tensor([[0.0, -4.0], [4.0, -4.0]]))


def test_dare_ties_hand_computed_and_seeded() -> None:
    d1, d2 = torch.tensor([[1.0, -2.0]]), torch.tensor([[-3.0, 1.0]])
    # density 1 drops nothing: signs of the sum (-2, -1) are - -, disjoint mean [[-3, -2]]
    assert torch.equal(merge.dare_ties([d1, d2], [1, 1], 1.0, None), torch.tensor([[-3.0, -2.0]]))
    big = [torch.randn(8, 8, generator=torch.Generator().manual_seed(i)) for i in range(2)]

    def run(seed: int) -> torch.Tensor:
        return merge.dare_ties(big, [1, 1], 0.5, torch.Generator().manual_seed(seed))

    assert torch.equal(run(1), run(1))
    assert not torch.equal(run(1), run(2))
    # every kept entry is an input entry rescaled by 1/density, or the mean of two
    candidates = torch.stack([2 * big[0], 2 * big[1], big[0] + big[1], torch.zeros(8, 8)])
    assert ((candidates - run(1)).abs().min(dim=0).values < 1e-6).all()


def test_svd_factors_reproduce_a_full_rank_delta() -> None:
    delta = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.5]])
    a, b = merge.svd_factors(delta, rank=4)
    assert a.shape == (4, 2)
    assert b.shape == (3, 4)
    torch.testing.assert_close(b @ a, delta)


@pytest.fixture(scope="module")
def adapters(tiny_backbone: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    from runtime.tiny import build_tiny_adapter

    root = tmp_path_factory.mktemp("to-merge")
    return [
        build_tiny_adapter(tiny_backbone, root / f"a{i}", seed=10 + i, rank=2) for i in range(3)
    ]


def _effective_deltas(backbone: Path, adapter: Path) -> dict[str, torch.Tensor]:
    """What PEFT itself adds to each module's weight once it has loaded the directory."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(backbone), adapter)
    return {
        name: module.get_delta_weight("default").detach()
        for name, module in model.named_modules()
        if hasattr(module, "get_delta_weight") and "default" in getattr(module, "lora_A", {})
    }


@pytest.mark.parametrize("method", ["linear", "ties", "dare_ties"])
def test_merged_adapter_loads_and_equals_the_dense_merge(
    tiny_backbone, adapters, tmp_path, method
) -> None:
    spec = merge.MergeSpec(method, density=0.6, seed=5, rank=64)
    out = merge.merge_adapters(adapters, tmp_path / method, spec)
    inputs = [_effective_deltas(tiny_backbone, p) for p in adapters]
    got = _effective_deltas(tiny_backbone, out)
    assert sorted(got) == sorted(inputs[0])
    generator = torch.Generator().manual_seed(5)
    for name in sorted(got):  # the same module order as the merge (sorted keys)
        deltas = [d[name] for d in inputs]
        if method == "linear":
            want = sum(deltas)
        elif method == "ties":
            want = merge.ties(deltas, [1, 1, 1], 0.6)
        else:
            want = merge.dare_ties(deltas, [1, 1, 1], 0.6, generator)
        torch.testing.assert_close(got[name], want, atol=2e-5, rtol=1e-4)
    assert json.loads((out / merge.MERGE_FILE).read_text())["method"] == method


def test_bad_merges_are_typed_errors(adapters, tmp_path) -> None:
    for unknown in ("average", "tspa"):  # tspa: named by the paper, not offered
        with pytest.raises(MergeError, match=r"unknown merge method .*linear, ties, dare_ties"):
            merge.MergeSpec(unknown)
    with pytest.raises(MergeError, match="density"):
        merge.MergeSpec("ties", density=0)
    with pytest.raises(MergeError, match="2 weights for 3"):
        merge.merge_adapters(adapters, tmp_path / "x", merge.MergeSpec("linear", weights=(1, 1)))
    with pytest.raises(MergeError, match="not a readable PEFT adapter"):
        merge.merge_adapters([tmp_path], tmp_path / "y", merge.MergeSpec("linear"))
    assert not (tmp_path / "x").exists()


def _patterned(source: Path, out: Path) -> Path:
    """A copy of `source` (rank 2) with v_proj at rank 1 (rank_pattern), q_proj's own alpha
    and rsLoRA."""
    from safetensors.torch import load_file, save_file

    out.mkdir()
    weights = load_file(source / "adapter_model.safetensors")
    for key, w in list(weights.items()):
        if ".v_proj." in key:
            weights[key] = (w[:1] if ".lora_A." in key else w[:, :1]).contiguous()
    save_file(weights, out / "adapter_model.safetensors", metadata={"format": "pt"})
    config = json.loads((source / "adapter_config.json").read_text())
    config |= {"rank_pattern": {"v_proj": 1}, "alpha_pattern": {"q_proj": 3}, "use_rslora": True}
    (out / "adapter_config.json").write_text(json.dumps(config))
    return out


def test_merges_use_each_modules_own_rank_and_scale(tiny_backbone, adapters, tmp_path) -> None:
    patterned = _patterned(adapters[0], tmp_path / "patterned")
    out = merge.merge_adapters(
        [patterned, adapters[1]], tmp_path / "out", merge.MergeSpec("linear")
    )
    inputs = [_effective_deltas(tiny_backbone, p) for p in (patterned, adapters[1])]
    got = _effective_deltas(tiny_backbone, out)
    for name in got:
        torch.testing.assert_close(
            got[name], inputs[0][name] + inputs[1][name], atol=2e-5, rtol=1e-4
        )
    config = json.loads((out / "adapter_config.json").read_text())
    # one rank for every module: 2 + 2, v_proj's 1 + 2 zero-padded; scale 1
    assert (config["r"], config["lora_alpha"], config["rank_pattern"]) == (4, 4, {})


def test_merges_refuse_what_the_registry_refuses(adapters, tmp_path) -> None:
    bad = tmp_path / "dora"
    shutil.copytree(adapters[0], bad)
    config = json.loads((bad / "adapter_config.json").read_text())
    (bad / "adapter_config.json").write_text(json.dumps(config | {"use_dora": True}))
    with pytest.raises(MergeError, match="use_dora=True is not supported") as info:
        merge.merge_adapters([bad, adapters[1]], tmp_path / "out", merge.MergeSpec("linear"))
    assert isinstance(info.value.__cause__, AdapterFormatError)
    assert not (tmp_path / "out").exists()
