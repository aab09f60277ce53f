"""Evaluation: the research suite as files (over the task world of `tasks`), runs and scoring.

Beside `trainers/` in the layering: may import `runtime`, `trainers` and `registry.client`,
never the registry's database, services or API.
"""
