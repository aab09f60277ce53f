"""The root of trust a development registry makes for itself, so that a registry started
without `--root` (`weact serve`, `make demo`) is two commands and still has a root to serve.

On first start, under its trust directory (`WEACT_TRUST_DIR`, default `./.weact/trust`):

    dev-admin.key, dev-admin.pub.json      the admin key of the root (threshold 1)
    dev-signer.key, dev-signer.pub.json    one key in `publish:*` and `approve:*` (threshold 1)
    root.json                              version 1, signed by dev-admin, marked development

Its signed `x-weact-development` field says what it is: the private keys sit on the
registry's host, so this root protects nothing against whoever controls that host. It lets
the signed path be tried end to end (`weact adapter push --key .weact/trust/dev-signer.key`,
`weact runtime serve --root .weact/trust/root.json`); production uses an offline root
(`weact root init`, docs/trust.md).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from registry.trust.keys import create_key, load_public_key, load_signer
from registry.trust.root import TrustRoot

DEVELOPMENT_FIELD = "x-weact-development"
ROOT_FILE = "root.json"
ADMIN, SIGNER = "dev-admin", "dev-signer"


def is_development(root: TrustRoot) -> bool:
    """Whether `root` says (in its signed bytes) that a registry generated it for itself."""
    return bool(root.root.unrecognized_fields.get(DEVELOPMENT_FIELD))


def development_root(directory: Path) -> tuple[TrustRoot, bool]:
    """The development root in `directory`, made there first if absent: (root, made now).

    Made in a sibling temporary directory and renamed into place, so that two registry
    processes starting at once end with one set of keys."""
    path = directory / ROOT_FILE
    if path.exists():
        return TrustRoot.load(path), False
    directory.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".trust-", dir=directory.parent))
    try:
        _make(scratch)
        try:
            os.rename(scratch, directory)  # fails when another process made it first
        except OSError:
            if not path.exists():
                raise
            return TrustRoot.load(path), False
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return TrustRoot.load(path), True


def _make(directory: Path) -> None:
    for name in (ADMIN, SIGNER):
        create_key(directory, name)
    signer = load_public_key(directory / f"{SIGNER}.pub.json")
    root = TrustRoot.create([load_public_key(directory / f"{ADMIN}.pub.json")], threshold=1)
    root.root.unrecognized_fields[DEVELOPMENT_FIELD] = True
    root.add_key("publish:*", signer)
    root.add_key("approve:*", signer)
    root.sign(load_signer(directory / f"{ADMIN}.key"))
    root.save(directory / ROOT_FILE)
