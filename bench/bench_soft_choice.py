"""What the constrained soft choice picks, and why: its first move on test questions.

`python bench/bench_soft_choice.py [BACKBONE] [N] [THREADS]` (default: the packaged SmolLM2)
takes N (5) test questions of the full reproduce size's research suite (seed 0) and renders
the context WeAct-soft's first choice sees (the suite's system prompt and tools, load_lora
describing the library's capabilities, the question, the assistant header) once per cyclic
rotation of the order in which load_lora lists the capabilities (`runtime.choice.rotations`,
rendered by `runtime.lora_tools.lora_tool_schemas`). The reference engine's
`score_options` teacher-forces every valid move (`runtime.choice.choice_options`) after each.

Per rotation it prints the move of the highest log-probability (the sum over the option's
tokens; what one listing alone would choose) and each capability's name-token log p; per
question, the move averaged over the rotations (what the runtime takes:
`runtime.choice.option_scores`) under the three scorings considered: the sum over the
option's tokens, the per-token mean, and the decision tokens only (where the options part
ways), with the scores; and the seconds of one choice (all rotations) on the PeftEngine.
"""

from __future__ import annotations

import sys
import time
from typing import Any


def main(backbone: str, n: int = 5, threads: int | None = None) -> None:
    import torch

    from evals.suite import generate_suite
    from runtime.chat import ASSISTANT_HEADER, encode, encode_turns
    from runtime.choice import best, branches, choice_options, decisions, option_scores, rotations
    from runtime.engine import AdapterSpec
    from runtime.engines.peft import PeftEngine
    from runtime.lora_tools import lora_tool_schemas
    from runtime.policy import CLOSING
    from tasks.tools import TOOL_SCHEMAS
    from tasks.trajectories import DESCRIPTIONS, SYSTEM

    if threads:
        torch.set_num_threads(threads)
    engine = PeftEngine(backbone)
    tok = engine.tokenizer
    library = {c: AdapterSpec(c, "-", description=d) for c, d in DESCRIPTIONS.items()}
    caps = sorted(library)
    options = choice_options(tok, caps, CLOSING)
    opts = [o.ids for o in options]
    name_at = next(i for i, (a, b) in enumerate(zip(*opts[:2], strict=False)) if a != b)
    points = decisions(opts)

    def context(question: str, order: list[str]) -> list[int]:
        tools = lora_tool_schemas(library, order) + [dict(t) for t in TOOL_SCHEMAS]
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
        turns = encode_turns(tok, messages, tools)
        return [t for turn in turns for t in turn.ids] + encode(tok, ASSISTANT_HEADER)

    def scorings(scored: list[Any]) -> dict[str, list[float]]:
        """Whole-option sum and mean, and the decision tokens only (the runtime's choice)."""
        per = [[[c[o[:i]][t] for i, t in enumerate(o)] for o in opts] for c in scored]

        def averaged(f: Any) -> list[float]:
            return [sum(f(c[k]) for c in per) / len(per) for k in range(len(opts))]

        return {
            "sum": averaged(sum),
            "mean": averaged(lambda lp: sum(lp) / len(lp)),
            "decisions": option_scores(opts, scored),
        }

    print(f"options: {[(o.move, len(o.ids)) for o in options]} (move, tokens)", flush=True)
    questions = generate_suite("research", 0, {"train": 10, "dev": 1, "test": 8}).questions
    test = list(questions["test"])
    for q in test[:: max(1, len(test) // n)][:n]:
        contexts = [context(q.question, order) for order in rotations(caps)]
        session = engine.new_session()
        session.append(contexts[0])  # what the runtime's history holds: the sorted listing
        start = time.perf_counter()
        chosen = session.choose(opts, contexts)  # what the runtime does: decisions only
        seconds = time.perf_counter() - start
        session.close()
        session = engine.new_session()
        session.append(contexts[0])
        every = session.score_branches(contexts, branches(opts)).logprobs  # every token
        session.close()
        for order, lps in zip(rotations(caps), every, strict=True):
            alone = options[best(option_scores(opts, [lps]))].move
            names = {c: round(lps[opts[i][:name_at]][opts[i][name_at]], 2) for i, c in
                enumerate(caps)}  # fmt: skip
            first = {tok.decode([t]): round(v, 2) for t, v in lps[()].items()}
            print(f"{q.id} listed {','.join(order)}: alone {alone}; name log p {names}, "
                  f"first token log p {first}")  # fmt: skip
        for name, scores in scorings(every).items():
            rounded = {o.move: round(s, 2) for o, s in zip(options, scores, strict=True)}
            print(f"{q.id} ({'>'.join(q.phases)}) averaged, {name}: "
                  f"{options[best(scores)].move} {rounded}")  # fmt: skip
        move = next(o.move for o in options if o.ids == chosen.token_ids)
        print(f"{q.id}: chose {move} in {seconds:.2f} s ({len(contexts)} contexts, "
              f"{chosen.prefilled} tokens run, {chosen.cache_hit} from the cache; "
              f"{len(points)} decision points)", flush=True)  # fmt: skip


if __name__ == "__main__":
    args = sys.argv[1:]
    if not args:
        from runtime.models import smollm2_dir

        args = [str(smollm2_dir())]
    main(args[0], *(int(a) for a in args[1:]))
