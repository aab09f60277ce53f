"""Posting masked-NLL scores for a promotion, as the evaluator (`weact eval nll --post`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def post_scores(
    client: Any,
    scores: Mapping[str, Any],
    data: Sequence[Path],
    suite_digest: str,
    *,
    library_digest: str,
    adapters: Mapping[str, int],
) -> list[dict[str, Any]]:
    """One library-scoped evaluation (`research-nll`) and one per capability brought in."""
    from trainers.post_eval import post_nll

    common = {"scores": scores, "data": list(data), "dataset_digest": suite_digest}
    posted = [post_nll(client, benchmark="research-nll", library_digest=library_digest, **common)]
    for capability, adapter_id in sorted(adapters.items()):
        posted.append(
            post_nll(client, benchmark=f"{capability}-nll", adapter_id=adapter_id, **common)
        )
    return posted
