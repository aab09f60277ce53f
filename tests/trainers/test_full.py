"""Full SFT: every backbone parameter trains on the phase samples; the identity adapter it
is served with changes no output."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from trainer_helpers import short

from trainers.errors import NoSamplesError, OutputExistsError
from trainers.full import FullSettings, identity_adapter, train_full
from trainers.lora import load_backbone
from trainers.phases import build_samples
from trainers.tasks import generate


@pytest.fixture(scope="module")
def samples(tokenizer):
    return build_samples(short(generate(2, seed=1)), tokenizer, None)


def test_full_sft_trains_every_parameter_and_saves_a_backbone(
    tiny_backbone: Path, tmp_path: Path, samples
) -> None:
    from trainers.evaluate import evaluate_nll

    out = tmp_path / "full"
    result = train_full(
        backbone=tiny_backbone, samples=samples, out=out,
        settings=FullSettings(lr=1e-3, epochs=2, seed=0),
    )  # fmt: skip
    base, tuned = load_backbone(tiny_backbone), load_backbone(out)
    before, after = dict(base.named_parameters()), dict(tuned.named_parameters())
    assert result.parameters == sum(p.numel() for p in base.parameters())
    assert set(before) == set(after)
    assert all(not torch.equal(before[n], after[n]) for n in before)  # every one moved
    assert len(result.losses) == 2 * len(samples)
    assert (out / "tokenizer.json").is_file()
    assert (out / "training.json").is_file()
    untrained = evaluate_nll(backbone=tiny_backbone, samples=samples, assignment={})
    trained = evaluate_nll(backbone=out, samples=samples, assignment={})
    assert set(trained) == set(untrained)
    assert all(trained[c].mean < untrained[c].mean for c in trained)
    with pytest.raises(OutputExistsError):
        train_full(backbone=tiny_backbone, samples=samples, out=out)
    with pytest.raises(NoSamplesError):
        train_full(backbone=tiny_backbone, samples=[], out=tmp_path / "none")


def test_the_identity_adapter_changes_no_output(tiny_backbone: Path, tmp_path: Path) -> None:
    from peft import PeftModel

    path = identity_adapter(tiny_backbone, tmp_path / "identity", "identity")
    ids = torch.tensor([[1, 5, 9, 13, 2]])
    base = load_backbone(tiny_backbone)
    expected = base(input_ids=ids).logits
    wrapped = PeftModel.from_pretrained(load_backbone(tiny_backbone), path)
    assert torch.equal(wrapped(input_ids=ids).logits, expected)


def _grads(model) -> dict[str, torch.Tensor]:
    return {n: p.grad.detach().clone() for n, p in model.named_parameters()}


def test_a_padded_batch_gives_the_per_sample_losses_and_gradients(
    tiny_backbone: Path, samples
) -> None:
    """One padded forward of samples of different lengths against the per-sample loop."""
    from trainers.loss import masked_nll, masked_nll_batch

    batch = list(samples[:4])
    assert len({len(s.input_ids) for s in batch}) > 1  # padding is exercised
    one, padded = load_backbone(tiny_backbone), load_backbone(tiny_backbone)
    one.requires_grad_(True)
    padded.requires_grad_(True)
    looped = []
    for s in batch:
        nll, count = masked_nll(one, s)
        (nll / count / len(batch)).backward()
        looped.append(float(nll.detach()))
    nll, counts = masked_nll_batch(padded, batch)
    (nll / torch.tensor(counts)).mean().backward()
    assert counts == [s.n_supervised for s in batch]
    assert nll.detach().tolist() == pytest.approx(looped, rel=1e-5)
    a, b = _grads(one), _grads(padded)
    for name in a:  # float32 sums in another order: agree to ~1e-6 of the largest
        scale = float(a[name].abs().max())
        assert float((a[name] - b[name]).abs().max()) <= 1e-4 * scale + 1e-8, name


@pytest.mark.parametrize("max_tokens", [8192, 1])  # one padded forward; one per sample
def test_one_batched_step_is_the_per_sample_loops_step(
    tiny_backbone: Path, samples, max_tokens: int
) -> None:
    """A step of 4 samples batched (or cut into forwards) against `run_steps`, the LoRA
    trainer's per-sample accumulation, on the same step: the same loss to 1e-5 and the same
    weights to 1e-6 (lr 1e-4; AdamW's first step moves each weight by at most lr)."""
    from trainers.full import full_steps
    from trainers.lora import run_steps

    batch, lr = list(samples[:4]), 1e-4
    reference, batched = load_backbone(tiny_backbone), load_backbone(tiny_backbone)
    reference.requires_grad_(True)
    batched.requires_grad_(True)
    ref_losses, _ = run_steps(reference, list(reference.parameters()), [batch], lr, None)
    settings = FullSettings(lr=lr, batch=4, max_tokens=max_tokens)
    losses = full_steps(batched, [batch], settings)
    assert losses == pytest.approx(ref_losses, rel=1e-5)
    base = load_backbone(tiny_backbone)
    after, moved = dict(batched.named_parameters()), 0.0
    for name, p in reference.named_parameters():
        assert float((p - after[name]).detach().abs().max()) <= 1e-6, name
        moved = max(moved, float((p - base.get_parameter(name)).detach().abs().max()))
    assert moved > 5e-5  # the step did move the weights


def test_bf16_autocast_trains_fp32_weights_close_to_fp32(tiny_backbone: Path, samples) -> None:
    from trainers.full import full_steps

    steps = [list(samples[:4])]
    fp32, bf16 = load_backbone(tiny_backbone), load_backbone(tiny_backbone)
    fp32.requires_grad_(True)
    bf16.requires_grad_(True)
    a = full_steps(fp32, steps, FullSettings(lr=1e-3, batch=4))
    b = full_steps(bf16, steps, FullSettings(lr=1e-3, batch=4, dtype="bfloat16"))
    assert all(p.dtype == torch.float32 for p in bf16.parameters())
    assert b[0] == pytest.approx(a[0], rel=2e-2)  # bf16 matmuls: ~3 significant digits
    assert a != b  # autocast did run in bf16


def test_batched_full_sft_takes_fewer_steps(tiny_backbone: Path, tmp_path: Path, samples) -> None:
    result = train_full(
        backbone=tiny_backbone, samples=samples, out=tmp_path / "full",
        settings=FullSettings(lr=1e-3, epochs=2, batch=3, dtype="bfloat16"),
    )  # fmt: skip
    assert len(result.losses) == -(-2 * len(samples) // 3)
    with pytest.raises(ValueError, match="bad full fine-tuning settings"):
        FullSettings(batch=0)
    with pytest.raises(ValueError, match="dtype must be one of"):
        FullSettings(dtype="float16")
