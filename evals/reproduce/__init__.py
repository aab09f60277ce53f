"""`make reproduce`: the paper's comparison and the continual-adaptation story, end to end.

    python -m evals.reproduce [--quick] [--train N --test N ...] [--engine peft|vllm]

Generates the research suite, trains the phase adapters and the baselines on its train split
(through `weact train` / `weact merge`, cached by a digest of their inputs), evaluates every
method on the test split, runs the continual part through a real registry and its gate, and
writes `reports/reproduce.md` with a PNG chart. Modules: `config` (sizes), `cache` (input
digests), `build` (training and merges), `methods` (evaluation), `continual` (registry and
gate), `report` (markdown and chart), `pipeline` (the run), `__main__` (flags).
"""
