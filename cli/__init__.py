"""The `weact` command: a thin dispatcher over each package's own command group."""
