"""Evaluation: a deterministic offline research benchmark, its search tools and its scoring.

Beside `trainers/` in the layering: may import `runtime`, `trainers` and `registry.client`,
never the registry's database, services or API.
"""
