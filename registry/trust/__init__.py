"""Signed trust: keys, the offline root of trust, signed adapter identities, verification.

Nothing here trusts the registry server. Built on the libraries made for the job, never on
a signature format of our own:

    keys.py        `create_key` / `load_signer` / `load_public_key`: securesystemslib
                   `CryptoSigner` (ed25519) key pairs; the private key stays in its owner's file
    root.py        `TrustRoot`: python-tuf `Metadata[Root]`, signed by a threshold of admin
                   keys, naming who may publish (per capability or all) and approve (per
                   channel or all) and each role's threshold; rotation checked as TUF does
    statements.py  `AdapterIdentity` and its signatures: DSSE envelopes (securesystemslib)
                   holding an in-toto Statement v1 whose subject is the manifest root
    policy.py      `check_adapter`: a trusted publisher's signature and the channel's
                   threshold of approver signatures, or `UntrustedError` saying what is missing

`registry.trust` imports neither the ORM nor the API: runtime nodes use it too.
"""

from registry.trust.keys import create_key, load_public_key, load_signer
from registry.trust.policy import Verdict, check_adapter
from registry.trust.root import TrustRoot
from registry.trust.statements import APPROVE, PUBLISH, AdapterIdentity, sign_identity

__all__ = [
    "APPROVE",
    "PUBLISH",
    "AdapterIdentity",
    "TrustRoot",
    "Verdict",
    "check_adapter",
    "create_key",
    "load_public_key",
    "load_signer",
    "sign_identity",
]
