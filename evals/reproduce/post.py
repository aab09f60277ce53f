"""Posting masked-NLL scores for a promotion, as the evaluator (`weact eval nll --post`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from registry.client.records import Evaluation


def post_scores(
    client: Any,
    scores: Mapping[str, Any],
    data: Sequence[Path],
    suite_digest: str,
    *,
    library_digest: str | None,
    adapters: Mapping[str, int],
) -> list[Evaluation]:
    """One library-scoped evaluation (`research-nll`) and one per capability brought in."""
    from trainers.post_eval import post_nll

    def post(benchmark: str, **target: Any) -> Evaluation:
        return post_nll(
            client, benchmark=benchmark, scores=scores, data=list(data),
            dataset_digest=suite_digest, **target,
        )  # fmt: skip

    posted = [post("research-nll", library_digest=library_digest)]
    posted.extend(post(f"{cap}-nll", adapter_id=i) for cap, i in sorted(adapters.items()))
    return posted
