"""Prometheus metrics of one node app: switch latency, rebuild time, their shares, tokens."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from runtime.engine import SwitchRecord
from runtime.episode import Episode, totals

SHARE_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)


class Metrics:
    """Prometheus metrics of one app (its own registry, so apps never share series)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.switch_s = Histogram(
            "weact_runtime_switch_seconds", "Adapter switch latency", registry=self.registry
        )
        self.rebuild_s = Histogram(
            "weact_runtime_rebuild_seconds", "KV-cache rebuild per step", registry=self.registry
        )
        self.episode_s = Histogram(
            "weact_runtime_episode_seconds", "Episode wall time", registry=self.registry
        )
        self.switch_share = Histogram(
            "weact_runtime_switch_share",
            "Share of episode time spent switching adapters",
            buckets=SHARE_BUCKETS,
            registry=self.registry,
        )
        self.rebuild_share = Histogram(
            "weact_runtime_rebuild_share",
            "Share of episode time spent rebuilding KV caches",
            buckets=SHARE_BUCKETS,
            registry=self.registry,
        )

        self.episodes = Counter(
            "weact_runtime_episodes", "Finished episodes", ["status"], registry=self.registry
        )
        self.tokens = Counter(
            "weact_runtime_tokens", "Tokens run through the model", ["kind"], registry=self.registry
        )
        self.seconds = Counter(
            "weact_runtime_model_seconds",
            "Model time (tokens/s = tokens / seconds per kind)",
            ["kind"],
            registry=self.registry,
        )

    def on_switch(self, record: SwitchRecord) -> None:
        self.switch_s.observe(record.seconds)

    def on_episode(self, episode: Episode) -> None:
        for step in episode.steps:
            if step.rebuild_s > 0:
                self.rebuild_s.observe(step.rebuild_s)
            self.tokens.labels("prefilled").inc(step.prefilled)
            self.tokens.labels("decoded").inc(step.decoded)
            self.seconds.labels("prefilled").inc(step.prefill_s)
            self.seconds.labels("decoded").inc(step.decode_s)
        self.episodes.labels(episode.status).inc()
        t = totals(episode)
        self.episode_s.observe(episode.elapsed_s)
        self.switch_share.observe(t["switch_share"])
        self.rebuild_share.observe(t["rebuild_share"])
