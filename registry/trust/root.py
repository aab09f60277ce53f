"""The offline root of trust: a python-tuf `Metadata[Root]` file signed by admin keys.

TUF's top-level `root` role holds the admin keys and their threshold (e.g. 2 of 3); the
metadata's `x-weact-roles` field (signed with the rest, as TUF allows extra fields) names
the roles of this project, each a TUF `Role` (keyids and threshold):

    publish:*       keys that may publish any capability (threshold 1)
    publish:write   keys that may publish `write` (this role wins over publish:*)
    approve:*       approver keys of every channel, with a default threshold
    approve:prod    the approvers of `prod` and its threshold (e.g. 2 of 3)

Every key is in the metadata's `keys`. A root counts only when its admin threshold signed
it; a new version replaces a trusted one only when the old admin threshold and its own both
signed it (TUF's root rotation), which is how a compromised key is revoked.

    root = TrustRoot.create([admin1, admin2, admin3], threshold=2)
    root.add_key("approve:prod", alice_pub); root.set_threshold("approve:prod", 2)
    root.sign(admin1_signer); root.sign(admin2_signer); root.save(Path("root.json"))
    trusted = TrustRoot.load(Path("root.json"))      # raises UntrustedError if not signed
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from securesystemslib.signer import Key, Signer
from tuf.api.exceptions import RepositoryError
from tuf.api.metadata import Metadata, Role, Root

from registry.errors import InvalidError, UntrustedError

ROLES_FIELD = "x-weact-roles"
KINDS = ("publish", "approve")
ADMIN = "admin"
TUF_ROLES = ("timestamp",)  # TUF top-level roles kept as TUF keeps them (the registry's key)


def role_name(kind: str, scope: str | None = None) -> str:
    """`publish:*`, `approve:prod`; `kind` alone means all (`*`)."""
    if kind == ADMIN:
        return ADMIN
    if kind not in KINDS:
        raise InvalidError(f"unknown role kind {kind!r}: one of admin, {', '.join(KINDS)}")
    return f"{kind}:{scope or '*'}"


class TrustRoot:
    """Who may sign what, as one python-tuf root metadata document."""

    def __init__(self, metadata: Metadata[Root]) -> None:
        self.metadata = metadata

    # -- building --------------------------------------------------------------------------
    @classmethod
    def create(cls, admins: Sequence[Key], threshold: int, expires_days: int = 365) -> TrustRoot:
        expires = datetime.now(UTC).replace(microsecond=0) + timedelta(days=expires_days)
        root = Root(expires=expires, unrecognized_fields={ROLES_FIELD: {}})
        root.roles["root"].threshold = threshold
        for key in admins:
            root.add_key(key, "root")
        trust = cls(Metadata(root))
        trust._check_threshold("root")
        return trust

    @property
    def root(self) -> Root:
        return self.metadata.signed

    @property
    def version(self) -> int:
        return int(self.root.version)

    def _roles(self) -> dict[str, Any]:
        return self.root.unrecognized_fields.setdefault(ROLES_FIELD, {})  # type: ignore[no-any-return]

    def _edit(self) -> None:
        """A signed root that changes becomes the next version, its signatures void."""
        if self.metadata.signatures:
            self.metadata.signatures.clear()
            self.root.version += 1

    def add_key(self, role: str, key: Key) -> None:
        self._edit()
        if role in (ADMIN, "root", *TUF_ROLES):
            self.root.add_key(key, "root" if role == ADMIN else role)
            return
        found = self.role(role) or Role([], 1)
        if key.keyid not in found.keyids:
            found.keyids.append(key.keyid)
        self._roles()[role] = found.to_dict()
        self.root.keys[key.keyid] = key

    def revoke_key(self, role: str, keyid: str) -> None:
        self._edit()
        if role in (ADMIN, "root", *TUF_ROLES):
            self.root.revoke_key(keyid, "root" if role == ADMIN else role)
            return
        found = self.role(role)
        if found is None or keyid not in found.keyids:
            raise InvalidError(f"key {keyid} is not in role {role}")
        found.keyids.remove(keyid)
        self._roles()[role] = found.to_dict()
        still_used = any(keyid in r.keyids for r in self.root.roles.values()) or any(
            keyid in r["keyids"] for r in self._roles().values()
        )
        if not still_used:
            del self.root.keys[keyid]

    def set_threshold(self, role: str, threshold: int) -> None:
        self._edit()
        if role in (ADMIN, "root"):
            self.root.roles["root"].threshold = threshold
        else:
            found = self.role(role) or Role([], 1)
            found.threshold = threshold
            self._roles()[role] = found.to_dict()

    def _check_threshold(self, role: str) -> None:
        found = self.root.roles["root"] if role in (ADMIN, "root") else self.role(role)
        if found is not None and found.threshold > len(found.keyids) and found.keyids:
            raise InvalidError(
                f"role {role}: threshold {found.threshold} > its {len(found.keyids)} keys"
            )

    def sign(self, signer: Signer) -> None:
        if signer.public_key.keyid not in self.root.roles["root"].keyids:
            raise InvalidError(
                "this key is not an admin key of the root: its signature won't count"
            )
        for role in [ADMIN, *self._roles()]:
            self._check_threshold(role)
        self.metadata.sign(signer, append=True)

    def save(self, path: Path) -> None:
        self.metadata.to_file(str(path))

    # -- reading ---------------------------------------------------------------------------
    def role(self, name: str) -> Role | None:
        data = self._roles().get(name)
        return Role.from_dict(dict(data)) if data is not None else None

    def role_for(self, kind: str, scope: str) -> tuple[str, Role] | None:
        """The role that decides `kind` for `scope` (a capability or channel): its own
        role if the root names one, else the `kind:*` role, else None (nobody may)."""
        for name in (role_name(kind, scope), role_name(kind)):
            found = self.role(name)
            if found is not None:
                return name, found
        return None

    def key(self, keyid: str) -> Key:
        return self.root.keys[keyid]

    @classmethod
    def from_bytes(cls, data: bytes, *, label: str = "root") -> TrustRoot:
        try:
            metadata = Metadata[Root].from_bytes(data)
        except (ValueError, KeyError, TypeError, RepositoryError) as exc:
            raise InvalidError(f"{label}: not TUF root metadata: {exc}") from exc
        if not isinstance(metadata.signed, Root):
            raise InvalidError(f"{label}: not root metadata")
        return cls(metadata)

    @classmethod
    def load(cls, path: Path, *, now: datetime | None = None) -> TrustRoot:
        """The root in `path`, verified: its admin threshold signed it and it has not expired."""
        trust = cls.from_bytes(Path(path).read_bytes(), label=str(path))
        trust.verify(now=now)
        return trust

    def verify(self, previous: TrustRoot | None = None, *, now: datetime | None = None) -> None:
        """Signed by its own admin threshold (and, for a new version, by the previous one's)."""
        if previous is not None and self.version != previous.version + 1:
            raise UntrustedError(
                f"root version {self.version} does not follow trusted version {previous.version}"
            )
        result = self.root.get_root_verification_result(
            previous.root if previous else None,
            self.metadata.signed_bytes,
            self.metadata.signatures,
        )
        if not result.verified:
            missing = max(result.first.missing, result.second.missing)
            raise UntrustedError(
                f"root version {self.version} lacks {missing} admin signature(s) "
                f"({len(result.signed)} valid)"
            )
        if self.root.is_expired(now):
            raise UntrustedError(f"root version {self.version} expired at {self.root.expires}")

    def summary(self) -> dict[str, Any]:
        admins = self.root.roles["root"]
        roles = {ADMIN: {"keyids": admins.keyids, "threshold": admins.threshold}}
        stamps = self.root.roles["timestamp"]
        if stamps.keyids:
            roles["timestamp"] = {"keyids": stamps.keyids, "threshold": stamps.threshold}
        roles.update({name: dict(role) for name, role in sorted(self._roles().items())})
        return {
            "version": self.version,
            "expires": self.root.expires.isoformat(),
            "signatures": sorted(self.metadata.signatures),
            "roles": roles,
        }
