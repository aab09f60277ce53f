"""The runtime node's HTTP API (`runtime.server.app`)."""

from runtime.server.app import EpisodeCreate, create_app, episode_policy

__all__ = ["EpisodeCreate", "create_app", "episode_policy"]
