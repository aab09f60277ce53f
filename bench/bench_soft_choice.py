"""Why the constrained soft choice picks what it picks: its first move on test questions.

`python bench/bench_soft_choice.py [BACKBONE] [N] [THREADS]` (default: the packaged SmolLM2)
takes N (5) test questions of the
full reproduce size's research suite (seed 0), renders the context WeAct-soft's first choice
sees (the suite's system prompt and tools, load_lora described with the library's
capabilities, the question, the assistant header) and teacher-forces every valid move
(`runtime.choice.choice_options`) from one KV-cached prefill. For each cyclic rotation of the
order in which load_lora lists the capabilities (enum and descriptions; the runtime lists
them sorted, so `code` first) it prints the move the masked greedy decode takes (what
`runtime.choice.AllowedSequences` decodes), the move of the highest whole-option mean
log-probability, and the log-probability of each capability's name token; then the move
whose log-probability averaged over the rotations is highest (each capability listed once in
every position: the listing's position bias cancels).
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any


def main(backbone: str, n: int = 5, threads: int | None = None) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from evals.suite import generate_suite
    from runtime.chat import ASSISTANT_HEADER, encode, encode_turns
    from runtime.choice import choice_options
    from runtime.engine import AdapterSpec
    from runtime.lora_tools import lora_tool_schemas
    from runtime.policy import CLOSING
    from tasks.tools import TOOL_SCHEMAS
    from tasks.trajectories import DESCRIPTIONS, SYSTEM

    if threads:
        torch.set_num_threads(threads)
    tok = AutoTokenizer.from_pretrained(backbone)
    model = AutoModelForCausalLM.from_pretrained(Path(backbone), dtype=torch.float32)
    caps = sorted(("plan", "search", "code", "write"))
    options = choice_options(tok, caps, CLOSING)
    first, second = options[0].ids, options[1].ids  # two loads: they part at the name
    name_at = next(i for i, (a, b) in enumerate(zip(first, second, strict=False)) if a != b)

    def context(question: str, order: list[str]) -> list[int]:
        library = {c: AdapterSpec(c, "-", description=DESCRIPTIONS[c]) for c in order}
        load = lora_tool_schemas(library)
        function = load[0]["function"]
        function["parameters"]["properties"]["capability"]["enum"] = order
        head = function["description"].split("Capabilities:\n")[0]
        listed = "\n".join(f"- {c}: {DESCRIPTIONS[c]}" for c in order)
        function["description"] = head + "Capabilities:\n" + listed
        tools = load + [dict(t) for t in TOOL_SCHEMAS]
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
        turns = encode_turns(tok, messages, tools)
        return [t for turn in turns for t in turn.ids] + encode(tok, ASSISTANT_HEADER)

    @torch.inference_mode()
    def logprobs(ids: list[int]) -> dict[str, list[float]]:
        out = model(input_ids=torch.tensor([ids]), use_cache=True)
        first, cache = out.logits[0, -1].log_softmax(-1), out.past_key_values
        scored = {}
        for o in options:
            rest = (
                model(
                    input_ids=torch.tensor([list(o.ids[:-1])]),
                    past_key_values=copy.deepcopy(cache),
                    use_cache=True,
                )
                .logits[0]
                .log_softmax(-1)
            )
            scored[o.move] = [float(first[o.ids[0]])] + [
                float(rest[i, t]) for i, t in enumerate(o.ids[1:])
            ]
        return scored

    def greedy(lp: dict[str, list[float]]) -> str:
        """The masked greedy decode: at each point where options part, the likeliest token."""
        alive: list[Any] = list(options)
        i = 0
        while len(alive) > 1:
            best = max(alive, key=lambda o: lp[o.move][i] if len(o.ids) > i else float("-inf"))
            alive = [o for o in alive if len(o.ids) > i and o.ids[i] == best.ids[i]]
            i += 1
        return str(alive[0].move)

    questions = generate_suite("research", 0, {"train": 10, "dev": 1, "test": 8}).questions
    test = list(questions["test"])
    for q in test[:: max(1, len(test) // n)][:n]:
        total = {c: 0.0 for c in caps}
        for r in range(len(caps)):
            order = caps[r:] + caps[:r]
            lp = logprobs(context(q.question, order))
            mean = {m: sum(v) / len(v) for m, v in lp.items()}
            names = {c: round(lp[c][name_at], 2) for c in caps}
            for c in caps:
                total[c] += sum(lp[c]) / len(caps)
            print(
                f"{q.id} ({'>'.join(q.phases)}) listed {','.join(order)}: greedy "
                f"{greedy(lp)}, whole-option mean {max(mean, key=mean.__getitem__)}; name "
                f"token log p {names}; first token '<' {lp[caps[0]][0]:.2f}, "
                f"'Done' {lp['answer'][0]:.2f}",
                flush=True,
            )
        print(f"{q.id}: averaged over the rotations {max(total, key=total.__getitem__)} "
              f"{ {c: round(v, 2) for c, v in total.items()} }", flush=True)  # fmt: skip


if __name__ == "__main__":
    args = sys.argv[1:]
    if not args:
        from runtime.models import smollm2_dir

        args = [str(smollm2_dir())]
    main(args[0], *(int(a) for a in args[1:]))
