"""vLLM's CPU build with LoRA: its own ops vs runtime/engines/vllm/cpu_lora.py, side by side.

One run, SmolLM2-135M, four random rank-8 LoRAs (all targets) resident, 16 requests spread
over them; each configuration in a fresh vLLM (a subprocess, so its plugins and thread
binding are its own):
- prefill: 16 prompts of 1,000 tokens, one output token each (prefix caching off);
- decode: 16 prompts of 200 tokens, 64 tokens each (ignore_eos), all in flight together.
Configurations: no LoRA request at all (the floor), vLLM's LoRA ops (our plugin left out
through VLLM_PLUGINS), our ops, our ops in fp32, and our ops with vLLM's default thread
binding (one core reserved for the front end).

    VLLM_LOGGING_LEVEL=WARNING .venv-vllm/bin/python bench/bench_vllm_lora.py
    ... bench/bench_vllm_lora.py --slots 8 --rank 32 --only "no LoRA (floor)" --only "our LoRA ops"

`--slots` / `--rank`: the engine's LoRA slots and largest rank (a reproduce run's engine has
8 slots of rank 32, for the rank-32 baselines, while WeAct's adapters are rank 8); `--only`
runs the configurations named so.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROMPTS, PREFILL_LEN, SHORT_LEN, DECODE = 16, 1000, 200, 64
CONFIGS = {
    # name: (dtype, lora requests, our ops, every core)
    "no LoRA (floor)": ("bfloat16", False, True, True),
    "vLLM's LoRA ops": ("bfloat16", True, False, True),
    "our LoRA ops": ("bfloat16", True, True, True),
    "our LoRA ops, fp32": ("float32", True, True, True),
    "our LoRA ops, default binding": ("bfloat16", True, True, False),
}


def make_lora(backbone: Path, out: Path) -> None:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    model = AutoModelForCausalLM.from_pretrained(backbone)
    config = LoraConfig(r=8, lora_alpha=16, target_modules=targets, init_lora_weights=False)
    get_peft_model(model, config).save_pretrained(out)


def measure(
    backbone: str, lora_dir: str, dtype: str, use_lora: bool, slots: int, rank: int
) -> dict[str, float]:
    from vllm import LLM, SamplingParams
    from vllm.lora.request import LoRARequest

    llm = LLM(model=backbone, dtype=dtype, enable_lora=True, max_loras=slots, max_lora_rank=rank,
              max_model_len=4096, block_size=32, kv_cache_memory_bytes=2 * 2**30,
              enable_prefix_caching=False)  # fmt: skip
    rng = random.Random(0)
    long = [[rng.randrange(100, 40000) for _ in range(PREFILL_LEN)] for _ in range(PROMPTS)]
    loras = [LoRARequest(f"a{i % 4}", i % 4 + 1, lora_dir) for i in range(PROMPTS)]
    lora = loras if use_lora else None

    def run(prompts: list[list[int]], params: SamplingParams) -> float:
        start = time.perf_counter()
        requests = lora[: len(prompts)] if lora else None
        llm.generate([{"prompt_token_ids": p} for p in prompts], params,
                     lora_request=requests, use_tqdm=False)  # fmt: skip
        return time.perf_counter() - start

    run(long[:2], SamplingParams(max_tokens=1, temperature=0))  # warm-up, LoRAs loaded
    prefill_s = run(long, SamplingParams(max_tokens=1, temperature=0))
    short = [p[:SHORT_LEN] for p in long]
    decode_s = run(short, SamplingParams(max_tokens=DECODE, temperature=0, ignore_eos=True))
    return {
        "prefill_tok_s": PROMPTS * PREFILL_LEN / prefill_s,
        "decode_wall_s": decode_s,
        "decode_tok_s": PROMPTS * DECODE / decode_s,
    }


def child(name: str, backbone: str, lora_dir: str, slots: str, rank: str) -> int:
    dtype, use_lora, _ours, _every = CONFIGS[name]
    result = measure(backbone, lora_dir, dtype, use_lora, int(slots), int(rank))
    print("RESULT " + json.dumps(result), flush=True)
    return 0


def _ratios(rows: dict[str, dict[str, float]]) -> None:
    """Our ops against each other configuration that ran."""
    ours = rows.get("our LoRA ops")
    others = {
        "vLLM's ops": "vLLM's LoRA ops", "no LoRA": "no LoRA (floor)",
        "fp32": "our LoRA ops, fp32", "default binding": "our LoRA ops, default binding",
    }  # fmt: skip
    for phase in ("prefill", "decode"):
        key = f"{phase}_tok_s"
        parts = [
            f"ours / {label} {ours[key] / rows[name][key]:.2f}x"
            for label, name in others.items()
            if ours and name in rows
        ]
        print(f"{phase}: " + ", ".join(parts))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--slots", type=int, default=4, help="vLLM's max_loras")
    parser.add_argument("--rank", type=int, default=8, help="vLLM's max_lora_rank")
    parser.add_argument("--only", action="append", choices=list(CONFIGS), help="(repeat)")
    args = parser.parse_args()
    try:
        import vllm  # noqa: F401
    except ImportError:
        print("skipped: needs vLLM (make venv-vllm; run with .venv-vllm/bin/python)")
        return 0
    from runtime.engines.vllm import use_every_core
    from runtime.models import smollm2_dir

    backbone = smollm2_dir()
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        make_lora(backbone, Path(tmp) / "lora")
        for name, (_dtype, _lora, ours, every) in CONFIGS.items():
            if args.only and name not in args.only:
                continue
            env = dict(os.environ)
            for key in ("VLLM_CPU_OMP_THREADS_BIND", "VLLM_CPU_NUM_OF_RESERVED_CPU"):
                env.pop(key, None)
            if every:
                use_every_core(env)
            if not ours:
                env["VLLM_PLUGINS"] = "weact_registry"  # every plugin but weact_cpu_lora
            done = subprocess.run(
                [sys.executable, __file__, "--child", name, str(backbone), str(Path(tmp) / "lora"),
                 str(args.slots), str(args.rank)],
                env=env, capture_output=True, text=True, check=False,
            )  # fmt: skip
            if done.returncode != 0:
                sys.stderr.write(done.stderr[-3000:])
                return 1
            result = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
            if not result:
                sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
                return 1
            rows[name] = json.loads(result[-1].removeprefix("RESULT "))
            print(f"{name:32s} " + "  ".join(f"{k} {v:8.1f}" for k, v in rows[name].items()),
                  flush=True)  # fmt: skip
    _ratios(rows)
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        sys.exit(child(*sys.argv[2:7]))
    sys.exit(main())
