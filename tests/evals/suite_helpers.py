"""Sizes of the small suite the evals tests share (the defaults are for real runs)."""

SMALL = {"train": 4, "dev": 2, "test": 6}
