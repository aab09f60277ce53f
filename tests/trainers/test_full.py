"""Full SFT: every backbone parameter trains on the phase samples; the identity adapter it
is served with changes no output."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
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


def test_a_packed_step_is_the_unpacked_step_on_fewer_tokens(tiny_backbone: Path, samples) -> None:
    """The samples of two trajectories in one step: one forward per trajectory (the shorter
    phases are prefixes of the longest) against one per sample: the same step loss to 1e-5
    and the same gradients to 1e-4 of the largest."""
    from trainers.full import full_steps
    from trainers.loss import masked_nll, masked_nll_batch, rows

    batch, n = list(samples), len(samples)
    assert len({s.trajectory for s in batch}) == 2
    assert n > 2
    packed = rows(batch, pack=True)
    assert len(packed) == 2
    assert sum(len(r.input_ids) for r in packed) < sum(len(s.input_ids) for s in batch) / 1.5
    one, shared = load_backbone(tiny_backbone), load_backbone(tiny_backbone)
    one.requires_grad_(True)
    shared.requires_grad_(True)
    for s in batch:
        nll, count = masked_nll(one, s)
        (nll / count / n).backward()
    nll, _ = masked_nll_batch(shared, [r.sample for r in packed], [r.weights for r in packed])
    (nll.sum() / n).backward()
    a, b = _grads(one), _grads(shared)
    for name in a:
        scale = float(a[name].abs().max())
        assert float((a[name] - b[name]).abs().max()) <= 1e-4 * scale + 1e-8, name
    each = full_steps(one, [batch], FullSettings(lr=1e-4, batch=n))
    assert full_steps(shared, [batch], FullSettings(lr=1e-4, batch=n, pack=True)) == (
        pytest.approx(each, rel=1e-5)
    )


def test_packed_full_sft_keeps_each_trajectory_in_its_step(
    tiny_backbone: Path, tmp_path: Path, samples
) -> None:
    from trainers.lora import trajectory_schedule

    order = trajectory_schedule(samples, epochs=2, seed=0)
    assert sorted(map(id, order)) == sorted(map(id, [*samples, *samples]))
    names = [s.trajectory for s in order]
    runs = [t for i, t in enumerate(names) if i == 0 or names[i - 1] != t]
    assert len(runs) == 4  # two trajectories, two epochs: each one's samples together
    per_trajectory = len(samples) // 2
    result = train_full(
        backbone=tiny_backbone, samples=samples, out=tmp_path / "full",
        settings=FullSettings(lr=1e-3, epochs=2, batch=per_trajectory, pack=True),
    )  # fmt: skip
    assert len(result.losses) == 4
    assert (tmp_path / "full" / "model.safetensors").is_file()


def _nll(ids: tuple[int, ...]) -> float:
    """A stand-in for a causal model's -log p of ids[-1]: a function of the prefix alone."""
    return (hash(ids) % 1000) / 1000


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b"]),  # trajectory
            st.integers(2, 24),  # length
            st.lists(st.booleans(), min_size=24, max_size=24),  # loss mask bits
            st.booleans(),  # a prefix of its trajectory's token sequence, or diverging
        ),
        min_size=1,
        max_size=8,
    )
)
def test_packed_rows_give_every_samples_mean_loss(specs) -> None:
    """Whatever folds into what, the rows' weighted sums of a causal model's per-token losses
    are the samples' per-token means added up, on no more tokens than a forward each."""
    from trainers.loss import rows
    from trainers.phases import PhaseSample

    batch = []
    for i, (name, n, bits, prefix) in enumerate(specs):
        ids = tuple(range(100, 100 + n)) if name == "a" else tuple(range(200, 200 + n))
        if not prefix:
            ids = (*ids[:-1], 1000 + i)
        mask = tuple(int(b) for b in bits[:n])  # a first token's bit counts for nothing
        batch.append(PhaseSample(name, "write", i, ids, mask))

    def losses(sample: PhaseSample, weights: tuple[float, ...]) -> float:
        ids = sample.input_ids
        return sum(w * _nll(ids[: j + 1]) for j, w in enumerate(weights) if w)

    scored = [(s, [j for j, m in enumerate(s.loss_mask) if m and j]) for s in batch]
    expected = sum(sum(_nll(s.input_ids[: j + 1]) for j in js) / len(js) for s, js in scored if js)
    for pack in (False, True):
        out = rows(batch, pack)
        assert sum(losses(r.sample, r.weights) for r in out) == pytest.approx(expected)
        assert sum(map(sum, (r.weights for r in out))) == pytest.approx(
            sum(1 for _, js in scored if js)
        )
        assert all(len(r.weights) == len(r.input_ids) == len(r.sample.loss_mask) for r in out)
    assert sum(len(r.input_ids) for r in rows(batch, True)) <= sum(len(s.input_ids) for s in batch)
