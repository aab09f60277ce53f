"""Key pairs of publishers, approvers and admins (securesystemslib `CryptoSigner`, ed25519).

`create_key(directory, name)` writes `NAME.key` (the private key, PKCS#8 PEM, mode 0600: it
never leaves its owner) and `NAME.pub.json` (the public key as TUF writes keys, with its
keyid), which is what an admin adds to the root of trust.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from cryptography.hazmat.primitives.serialization import load_pem_private_key
from securesystemslib.signer import CryptoSigner, Key, Signer, SSlibKey

from registry.errors import InvalidError


def create_key(directory: Path, name: str) -> tuple[Path, Path]:
    """A new ed25519 key pair in `directory`: (private key file, public key file)."""
    directory.mkdir(parents=True, exist_ok=True)
    private, public = directory / f"{name}.key", directory / f"{name}.pub.json"
    if private.exists():
        raise InvalidError(f"{private} exists: refusing to overwrite a private key")
    signer = CryptoSigner.generate_ed25519()
    fd = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(signer.private_bytes)
    public.write_text(json.dumps(public_key_json(signer.public_key), indent=2) + "\n")
    return private, public


def public_key_json(key: Key) -> dict[str, object]:
    return {"keyid": key.keyid, **key.to_dict()}


def load_signer(path: Path) -> Signer:
    """The signer of a private key file written by `create_key`."""
    try:
        private = load_pem_private_key(Path(path).read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise InvalidError(f"{path}: not a private key file: {exc}") from exc
    return CryptoSigner(private)


def load_public_key(path: Path) -> Key:
    """A public key file (`NAME.pub.json`), or the public half of a private key file."""
    text = Path(path).read_bytes()
    if text.lstrip().startswith(b"-----BEGIN"):
        return load_signer(path).public_key
    try:
        data = json.loads(text)
        keyid = data.pop("keyid")
        return SSlibKey.from_dict(keyid, data)
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidError(f"{path}: not a public key file: {exc}") from exc
