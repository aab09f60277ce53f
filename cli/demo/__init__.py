"""`weact demo`: the product end to end on embedded defaults, one printed step at a time.

The demo starts `weact serve` as a child process (`registry.launcher`: SQLite + a local blob
directory in a temp folder, on a free port), then walks the lifecycle through
`registry.client`: tokens, a backbone, the plan/search/write capabilities, three adapters,
approval by a second principal, promotion, an updated write++ with lineage, rollback and
revocation (`registry_steps`). Then the product around it (`product_steps`): deterministic
trajectories train a new capability `code` (trainers), which is published with its
provenance, approved and promoted into prod; a runtime node pulls prod over HTTP
(`runtime.sync`), serves it from `PeftEngine`, audits the resident weights against the
registry's manifest roots, posts a heartbeat and runs one hard-policy episode. The audit
event chain is verified last. `--plain` (no torch) runs the registry steps only, on weights
written with the standard library (`weights`).

Steps are data (`Step`s of the shared `Demo` state, in `harness`); `command` holds the step
lists, `run_demo` and the click command.
"""

from cli.demo.command import demo

__all__ = ["demo"]
