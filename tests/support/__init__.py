"""Test support for the whole suite; never installed with the product.

pytest puts `tests/` on `sys.path` (`pythonpath` in pyproject.toml), so tests import
`support.<module>`:

- `support.fixtures` (a pytest plugin loaded by tests/conftest.py): `registry_server`, a
  real `weact serve` from the product's own launcher (`cli.launcher`).
"""
