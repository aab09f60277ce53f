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
