"""vLLM's CPU build: decode throughput of concurrent LoRA episodes vs the KV cache's size.

One run, SmolLM2-135M in bf16, four random rank-8 LoRAs resident; each configuration in a
fresh vLLM (a subprocess). N requests share a 700-token prefix (the system prompt and tool
schemas of an episode) and carry 1,500 tokens of their own (an episode's history); after
one pass that fills the prefix cache, each request adds 8 tokens and decodes 96 (one
agent step). Configurations: 16 requests in a 1 GiB cache, 40 in 1 GiB, 40 in the size
`evals.engines.vllm_cpu_args` picks for 40 (every context at max_model_len).

    VLLM_LOGGING_LEVEL=WARNING .venv-vllm/bin/python bench/bench_vllm_kv.py
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PREFIX, OWN, ADDED, DECODE = 700, 1500, 8, 96


def measure(backbone: str, lora_dir: str, requests: int, kv_bytes: int) -> dict[str, float]:
    from vllm import LLM, SamplingParams
    from vllm.lora.request import LoRARequest

    from runtime.engines.vllm import use_every_core

    use_every_core()
    llm = LLM(model=backbone, dtype="bfloat16", enable_lora=True, max_loras=4, max_lora_rank=8,
              max_model_len=4096, block_size=32, kv_cache_memory_bytes=kv_bytes,
              enable_prefix_caching=True)  # fmt: skip
    rng = random.Random(0)
    shared = [rng.randrange(100, 40000) for _ in range(PREFIX)]
    prompts = [shared + [rng.randrange(100, 40000) for _ in range(OWN)] for _ in range(requests)]
    loras = [LoRARequest(f"a{i % 4}", i % 4 + 1, lora_dir) for i in range(requests)]
    params = SamplingParams(max_tokens=DECODE, ignore_eos=True, temperature=0)

    def run(batch: list[list[int]]) -> float:
        start = time.perf_counter()
        llm.generate([{"prompt_token_ids": p} for p in batch], params, lora_request=loras,
                     use_tqdm=False)  # fmt: skip
        return time.perf_counter() - start

    run(prompts)  # fills the prefix cache, as an episode's earlier steps do
    seconds = run([p + [5] * ADDED for p in prompts])
    return {"seconds": seconds, "tok_s": requests * DECODE / seconds}


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_vllm_lora import make_lora

    from evals.engines import vllm_cpu_args
    from runtime.models import smollm2_dir

    backbone = str(smollm2_dir())
    sized = vllm_cpu_args(backbone, 40)["kv_cache_memory_bytes"]
    configs = [(16, 2**30), (40, 2**30), (40, sized)]
    print(f"{'requests':>8} {'KV cache':>9} {'decode s':>9} {'tok/s':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        lora = Path(tmp) / "lora"
        make_lora(Path(backbone), lora)
        rates = []
        for requests, kv in configs:
            out = subprocess.run(
                [sys.executable, __file__, backbone, str(lora), str(requests), str(kv)],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT "))
            result = json.loads(line.removeprefix("RESULT "))
            rates.append(result["tok_s"])
            print(f"{requests:>8} {kv / 2**30:>7.2f} G {result['seconds']:>9.1f} "
                  f"{result['tok_s']:>7.1f}", flush=True)  # fmt: skip
    print(
        f"40 in the sized cache / 16 in 1 GiB: {rates[2] / rates[0]:.2f}x; "
        f"/ 40 in 1 GiB: {rates[2] / rates[1]:.2f}x"
    )


if __name__ == "__main__":
    if len(sys.argv) > 1:
        backbone, lora_dir, requests, kv = sys.argv[1:]
        print("RESULT " + json.dumps(measure(backbone, lora_dir, int(requests), int(kv))))
    else:
        main()
