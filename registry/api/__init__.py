"""HTTP layer: routes parse input, call one service function, return a schema."""
