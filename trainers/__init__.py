"""Phase-wise LoRA training, publishing without replay, and the merge baselines."""
