"""Training one capability's LoRA: loss goes down, everything else stays bit-identical."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from trainer_helpers import short

from trainers.errors import NoSamplesError, RootChangedError
from trainers.evaluate import evaluate_nll
from trainers.lora import LoraSettings, train_lora
from trainers.phases import build_samples
from trainers.tasks import generate

SETTINGS = LoraSettings(rank=8, alpha=16, lr=2e-2, epochs=3, seed=7)


def _digests(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())}


@pytest.fixture(scope="module")
def frozen(tiny_backbone: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from runtime.tiny import build_tiny_adapter

    root = tmp_path_factory.mktemp("frozen")
    return {
        c: build_tiny_adapter(tiny_backbone, root / c, seed=i)
        for i, c in enumerate(["search", "write"])
    }


@pytest.fixture(scope="module")
def plan_samples(tokenizer):
    return build_samples(short(generate(4, seed=1)), tokenizer, {"plan"})


def test_training_lowers_masked_nll_and_keeps_frozen_weights(
    tiny_backbone, tmp_path, frozen, plan_samples, tokenizer
) -> None:
    before_files = {name: _digests(d) for name, d in frozen.items()}
    seen: list = []

    def spy(peft_model) -> None:
        seen.extend(
            (name, p.requires_grad, p.grad)
            for name, p in peft_model.named_parameters()
            if ".lora_" not in name or ".plan." not in name
        )

    held_out = build_samples(short(generate(3, seed=99)), tokenizer, {"plan"})
    result = train_lora(
        backbone=tiny_backbone,
        adapter="plan",
        samples=plan_samples,
        out=tmp_path / "plan",
        settings=SETTINGS,
        frozen=frozen,
        before_verify=spy,
    )
    # frozen: the backbone and the other adapters never required or received a gradient
    assert seen
    assert all(not requires and grad is None for _, requires, grad in seen)
    assert any(".write." in name for name, _, _ in seen)
    assert {name: _digests(d) for name, d in frozen.items()} == before_files
    assert result.covered == ["plan"]
    untrained = evaluate_nll(backbone=tiny_backbone, samples=held_out, assignment={})
    trained = evaluate_nll(
        backbone=tiny_backbone, samples=held_out, assignment={"plan": result.out}
    )
    assert trained["plan"].mean < 0.85 * untrained["plan"].mean
    assert sorted(p.name for p in result.out.iterdir()) == [
        "README.md",  # the model card
        "adapter_config.json",
        "adapter_model.safetensors",
        "training.json",
    ]


def test_same_seed_same_bytes(tiny_backbone, tmp_path, plan_samples) -> None:
    settings = LoraSettings(rank=2, alpha=4, lr=5e-3, epochs=1, seed=3)
    outs = [
        train_lora(
            backbone=tiny_backbone,
            adapter="plan",
            samples=plan_samples[:2],
            out=tmp_path / f"w{i}",
            settings=settings,
        ).out
        for i in range(2)
    ]
    assert (outs[0] / "adapter_model.safetensors").read_bytes() == (
        outs[1] / "adapter_model.safetensors"
    ).read_bytes()


def test_a_bf16_backbone_trains_fp32_lora_weights_that_lower_the_nll(
    tiny_backbone, tmp_path, plan_samples, tokenizer
) -> None:
    """`--dtype bfloat16`: the frozen backbone runs in bf16, the adapter is saved in fp32 and
    still lowers the (fp32) masked NLL of held-out plan phases; the roots check still holds."""
    from safetensors import safe_open

    settings = LoraSettings(rank=8, alpha=16, lr=2e-2, epochs=3, seed=7, dtype="bfloat16")
    result = train_lora(
        backbone=tiny_backbone, adapter="plan", samples=plan_samples, out=tmp_path / "plan",
        settings=settings,
    )  # fmt: skip
    with safe_open(result.out / "adapter_model.safetensors", "pt") as f:
        dtypes = {str(f.get_tensor(k).dtype) for k in f.keys()}  # noqa: SIM118
    assert dtypes == {"torch.float32"}
    held_out = build_samples(short(generate(3, seed=99)), tokenizer, {"plan"})
    untrained = evaluate_nll(backbone=tiny_backbone, samples=held_out, assignment={})
    trained = evaluate_nll(
        backbone=tiny_backbone, samples=held_out, assignment={"plan": result.out}
    )
    assert trained["plan"].mean < 0.85 * untrained["plan"].mean
    with pytest.raises(ValueError, match="dtype"):
        LoraSettings(dtype="float16")


@pytest.mark.parametrize("target", ["backbone", "adapter:write"])
def test_refuses_when_a_frozen_root_changed(
    tiny_backbone, tmp_path, frozen, plan_samples, target
) -> None:
    import torch

    def tamper(peft_model) -> None:
        for name, p in peft_model.named_parameters():
            is_write = ".lora_A.write." in name
            is_base = "q_proj.base_layer.weight" in name
            if (target == "backbone" and is_base) or (target == "adapter:write" and is_write):
                with torch.no_grad():
                    p.view(-1)[0] += 1e-3
                return

    with pytest.raises(RootChangedError) as info:
        train_lora(
            backbone=tiny_backbone,
            adapter="plan",
            samples=plan_samples[:1],
            out=tmp_path / "out",
            settings=SETTINGS,
            frozen=frozen,
            before_verify=tamper,
        )
    assert list(info.value.changed) == [target]
    assert not (tmp_path / "out").exists()


def test_no_samples_is_a_typed_error(tiny_backbone, tmp_path) -> None:
    with pytest.raises(NoSamplesError):
        train_lora(backbone=tiny_backbone, adapter="code", samples=[], out=tmp_path / "x")


def test_bad_frozen_adapters_are_refused_before_loading(
    tiny_backbone, tmp_path, frozen, plan_samples
) -> None:
    from trainers.errors import AdapterSpecError

    for bad, match in [
        ({"plan": frozen["write"]}, "one being trained"),
        ({"x": tmp_path}, "no adapter_config"),
    ]:
        with pytest.raises(AdapterSpecError, match=match):
            train_lora(
                backbone=tiny_backbone,
                adapter="plan",
                samples=plan_samples,
                out=tmp_path / "o",
                frozen=bad,
            )
    assert not (tmp_path / "o").exists()


def test_a_shared_lora_in_steps_of_whole_trajectories(tiny_backbone: Path, tokenizer) -> None:
    """`per_trajectory`: a step per trajectory (every phase of it, one forward), the same
    losses as the samples one forward each in the same steps (to 1e-5, two steps)."""
    from dataclasses import replace

    from trainers.errors import AdapterSpecError
    from trainers.lora import batches, freeze_all_but, load_backbone, run_steps, wrap

    samples = build_samples(short(generate(2, seed=1)), tokenizer, None)
    settings = LoraSettings(rank=4, alpha=8, lr=1e-2, epochs=2, seed=0, per_trajectory=True)
    steps = batches(samples, settings)
    assert [len({s.trajectory for s in step}) for step in steps] == [1, 1, 1, 1]
    assert sorted(len(step) for step in steps) == [3, 3, 3, 3]  # every phase of it
    assert len(batches(samples, replace(settings, batch=2))) == 2
    with pytest.raises(AdapterSpecError, match="not sequential"):
        batches(samples, settings, sequential=["plan", "write"])

    def trained(pack: bool) -> list[float]:
        model = wrap(load_backbone(tiny_backbone), "shared", settings, None)
        params = freeze_all_but(model, "shared")
        losses, seen = run_steps(model, params, steps[:2], settings.lr, None, pack=pack)
        assert seen == [6]
        return losses

    assert trained(pack=True) == pytest.approx(trained(pack=False), rel=1e-5)
