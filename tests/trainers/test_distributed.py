"""`weact train` under torchrun: two CPU processes (gloo) against one, on the tiny model.

With the same global batch, DDP's averaged gradient is the single process's mean gradient
over the same samples: each rank's per-sample losses are weighted by world_size / batch and
DDP divides their sum by world_size, where one process weights them by 1 / batch; those
scalings are exact in binary floating point and each sample's forward and backward are the
same computation in either process. The adapters are therefore held to ATOL = 1e-6 in fp32:
measured, they are bit-identical (max abs difference 0.0). Adam hides a gradient's overall
scale, not its direction, yet the errors this guards against stay far above 1e-6: forgetting
DDP's division by the world size gave 3.2e-4, an idle rank adding its placeholder sample to
the short last batch 3.3e-3 (a LoRA-B weight reaches 5e-2 here). A rank training on the whole
batch instead of its share shows in `samples_per_rank`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.serving import InProcessRegistry
from trainer_helpers import short

from cli.main import app
from registry.client import RegistryClient
from storage.manifest import manifest_of_path
from trainers.distributed import DistributedError, World, detect
from trainers.tasks import generate
from trainers.trajectory import write_trajectories

ATOL = 1e-6
ROOT = Path(__file__).resolve().parents[2]
TORCHRUN = Path(sys.executable).with_name("torchrun")
WEACT = Path(sys.executable).with_name("weact")
# 3 trajectories x 3 epochs = 9 write samples: 5 steps of 2, the last one sample short, so
# rank 1 joins the last all-reduce with nothing of its own.
ARGS = ["--rank", "2", "--alpha", "4", "--lr", "0.01", "--seed", "1", "--epochs", "3"]


def test_detect_reads_the_launchers_environment() -> None:
    assert detect({}) == World()
    torchrun = {"WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "1", "TORCHELASTIC_RUN_ID": "x"}
    assert detect(torchrun) == World(4, 3, 1, "torchrun")
    accelerate = torchrun | {"ACCELERATE_MIXED_PRECISION": "no"}
    assert detect(accelerate).launcher == "accelerate"
    assert detect({"WORLD_SIZE": "2", "RANK": "1"}).launcher == "env"
    for bad in ({"WORLD_SIZE": "two"}, {"WORLD_SIZE": "2", "RANK": "2"}):
        with pytest.raises(DistributedError):
            detect(bad)


def test_a_batch_is_split_by_rank_without_repeats() -> None:
    batch = list("abcde")
    shares = [World(2, r, r, "torchrun").shard(batch) for r in range(2)]
    assert shares == [["a", "c", "e"], ["b", "d"]]
    assert World(4, 3, 3, "env").shard(["a"]) == []


def test_fewer_samples_per_step_than_processes_is_a_usage_error(tmp_path, tiny_backbone) -> None:
    data = write_trajectories(tmp_path / "t.jsonl", short(generate(1, seed=4)))
    args = ["train", "--shared", "--data", str(data), "--backbone", str(tiny_backbone)]
    env = {"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0"}
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "o"), "--batch", "1"], env=env)
    assert result.exit_code == 2
    assert "fewer samples per step than processes (2)" in result.output
    assert not (tmp_path / "o").exists()


def test_batches_follow_the_schedule_and_never_mix_capabilities_when_sequential() -> None:
    from trainers.lora import LoraSettings, batches, schedule
    from trainers.phases import PhaseSample

    samples = [PhaseSample(f"t{i}", cap, 0, (1, 2), (0, 1)) for i, cap in enumerate("aaabb")]
    settings = LoraSettings(batch=2, epochs=1, seed=3)
    steps = batches(samples, settings)
    assert [s for step in steps for s in step] == schedule(samples, 1, 3, None)
    assert [len(step) for step in steps] == [2, 2, 1]
    steps = batches(samples, settings, sequential=["a", "b"])
    assert [len(step) for step in steps] == [2, 1, 2]
    assert all(len({s.capability for s in step}) == 1 for step in steps)


@pytest.fixture(scope="module")
def registry(registry_server: InProcessRegistry, tiny_backbone: Path) -> dict[str, str]:
    admin = RegistryClient(registry_server.url, registry_server.bootstrap_token("root", "admin"))
    with admin:
        token = admin.create_token(name="ddp", role="publisher")["token"]
        admin.register_backbone(name="tiny", manifest=manifest_of_path(tiny_backbone).to_json())
        admin.create_capability(name="write", description="write adapter", order=0)
    return {"url": registry_server.url, "token": token}


def _tensors(directory: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(directory / "adapter_model.safetensors")


def test_two_processes_under_torchrun_train_the_single_process_adapter(
    tmp_path, tiny_backbone, registry
) -> None:
    data = write_trajectories(tmp_path / "t.jsonl", short(generate(3, seed=4)))
    common = ["--capability", "write", "--data", str(data), "--backbone", str(tiny_backbone)]
    one = CliRunner().invoke(
        app, ["train", *common, *ARGS, "--batch", "2", "--out", str(tmp_path / "one")]
    )
    assert one.exit_code == 0, one.output

    publish = ["--publish", "--registry", registry["url"], "--token", registry["token"]]
    env = os.environ | {
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    }
    env |= {"OMP_NUM_THREADS": "1", "WEACT_PROGRESS": "0"}
    launch = [str(TORCHRUN), "--standalone", "--nproc_per_node=2", str(WEACT), "train"]
    two = subprocess.run(
        [*launch, *common, *ARGS, "--out", str(tmp_path / "two"), *publish],  # --batch: 1 per rank
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert two.returncode == 0, two.stdout + two.stderr
    assert two.stdout.count("saved ") == 1, two.stdout  # rank 0 alone prints and publishes
    assert two.stdout.count("published ") == 1, two.stdout

    a, b = _tensors(tmp_path / "one"), _tensors(tmp_path / "two")
    assert a.keys() == b.keys()
    diff = max(float((a[k] - b[k]).abs().max()) for k in a)
    moved = max(float(a[k].abs().max()) for k in a if "lora_B" in k)  # B starts at zero
    assert diff <= ATOL < moved / 100, (diff, moved)

    trained = [json.loads((tmp_path / d / "training.json").read_text()) for d in ("one", "two")]
    assert trained[0]["losses"] == pytest.approx(trained[1]["losses"], abs=ATOL)
    assert [t["steps"] for t in trained] == [5, 5]
    assert [t["settings"]["batch"] for t in trained] == [2, 2]
    assert trained[0]["distributed"] == {
        "world_size": 1,
        "launcher": None,
        "backend": None,
        "samples_per_rank": [9],
    }
    assert trained[1]["distributed"] == {
        "world_size": 2,
        "launcher": "torchrun",
        "backend": "gloo",
        "samples_per_rank": [5, 4],
    }
    with RegistryClient(registry["url"], registry["token"]) as client:
        versions = client.list_adapters(capability="write")["items"]
    assert len(versions) == 1
    assert versions[0]["manifest_root"] == manifest_of_path(tmp_path / "two").root
    assert versions[0]["provenance"]["trainer"]["distributed"] == trained[1]["distributed"]


@pytest.mark.slow  # another torchrun job: 14 s on a loaded 2-core machine
def test_rank_0_refusing_the_output_stops_every_rank_and_writes_nothing(
    tmp_path, tiny_backbone
) -> None:
    data = write_trajectories(tmp_path / "t.jsonl", short(generate(1, seed=4)))
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep").write_text("mine")
    env = os.environ | {
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    }
    launch = [str(TORCHRUN), "--standalone", "--nproc_per_node=2", str(WEACT), "train"]
    args = ["--shared", "--data", str(data), "--backbone", str(tiny_backbone), "--out", str(out)]
    done = subprocess.run(
        [*launch, *args],
        env=env | {"OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode != 0
    assert f"output directory {out} exists and is not empty" in done.stderr
    # Rank 1 says "rank 0 failed: OutputExistsError ..." unless torchrun stops it first.
    assert [p.name for p in out.iterdir()] == ["keep"]
