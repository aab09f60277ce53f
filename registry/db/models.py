"""SQLAlchemy 2.0 ORM models. The schema itself comes only from the Alembic migrations."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    cast,
    select,
)
from sqlalchemy.orm import (
    DeclarativeBase,
    Mapped,
    aliased,
    column_property,
    mapped_column,
    relationship,
)

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

DIGEST = String(64)


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """Stored as naive UTC (same on SQLite and PostgreSQL), returned timezone-aware."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else value.replace(tzinfo=UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {datetime: UTCDateTime(), dict[str, Any]: JSON(), list[str]: JSON()}


class SqlPrincipal(Base):
    """An identity (a person or a machine); its tokens act as it, whatever their role."""

    __tablename__ = "principals"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class SqlToken(Base):
    __tablename__ = "tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(128), index=True)
    principal_id: Mapped[int] = mapped_column(ForeignKey("principals.id"), index=True)
    role: Mapped[str] = mapped_column(String(16))
    token_hash: Mapped[str] = mapped_column(DIGEST, unique=True)
    node_id: Mapped[str | None] = mapped_column(String(128), index=True, default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(default=None)


class SqlBackbone(Base):
    __tablename__ = "backbones"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(256))
    root: Mapped[str] = mapped_column(DIGEST, unique=True)
    tensor_count: Mapped[int] = mapped_column(Integer)
    param_count: Mapped[int] = mapped_column(BigInteger)
    manifest_digest: Mapped[str] = mapped_column(DIGEST)
    created_by: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class SqlCapability(Base):
    __tablename__ = "capabilities"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")
    order: Mapped[int | None] = mapped_column("order_index", Integer, default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class SqlAdapterVersion(Base):
    __tablename__ = "adapter_versions"
    __table_args__ = (
        UniqueConstraint("capability_id", "backbone_id", "version"),
        # identical bytes are one version (per capability and backbone); NULLs never clash
        Index(
            "ix_adapter_versions_content",
            "capability_id",
            "backbone_id",
            "content_digest",
            unique=True,
        ),
        # pages filtered by capability and state, in id order; counts (migration 0007)
        Index("ix_adapter_versions_capability_id_state_id", "capability_id", "state", "id"),
        Index("ix_adapter_versions_state_id", "state", "id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    capability_id: Mapped[int] = mapped_column(ForeignKey("capabilities.id"))
    backbone_id: Mapped[int] = mapped_column(ForeignKey("backbones.id"), index=True)
    version: Mapped[int] = mapped_column(Integer)
    label: Mapped[str | None] = mapped_column(String(128), default=None)
    parent_id: Mapped[int | None] = mapped_column(
        ForeignKey("adapter_versions.id"), index=True, default=None
    )
    state: Mapped[str] = mapped_column(String(16))
    rank: Mapped[int] = mapped_column(Integer)
    alpha: Mapped[float] = mapped_column(Float)
    target_modules: Mapped[list[str]] = mapped_column()
    files: Mapped[dict[str, Any]] = mapped_column()
    manifest_root: Mapped[str] = mapped_column(DIGEST, index=True)
    provenance: Mapped[dict[str, Any]] = mapped_column()
    created_by: Mapped[str] = mapped_column(String(128))
    created_by_id: Mapped[int | None] = mapped_column(
        ForeignKey("principals.id"), index=True, default=None
    )
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    decided_by: Mapped[str | None] = mapped_column(String(128), default=None)
    decided_at: Mapped[datetime | None] = mapped_column(default=None)
    reason: Mapped[str | None] = mapped_column(Text, default=None)
    card: Mapped[str | None] = mapped_column(Text, default=None)  # README.md, searchable
    content_digest: Mapped[str | None] = mapped_column(DIGEST, default=None)

    capability: Mapped[SqlCapability] = relationship(lazy="joined", innerjoin=True)
    backbone: Mapped[SqlBackbone] = relationship(lazy="joined", innerjoin=True)
    tags: Mapped[list[SqlAdapterTag]] = relationship(
        lazy="selectin", cascade="all, delete-orphan", order_by="SqlAdapterTag.key"
    )

    if TYPE_CHECKING:  # mapped below the classes: a correlated subquery (_parent_name)
        parent_name: str | None


class SqlVersionCount(Base):
    """How many versions of a capability are in a state, kept in the transaction that
    registers or decides a version (`registry.services.version_counts`): the capabilities
    page and the metrics read these few rows, not an index of every version."""

    __tablename__ = "version_counts"

    capability_id: Mapped[int] = mapped_column(ForeignKey("capabilities.id"), primary_key=True)
    state: Mapped[str] = mapped_column(String(16), primary_key=True)
    count: Mapped[int] = mapped_column(Integer)


class SqlAdapterTag(Base):
    """A `key=value` tag of an adapter version (one value per key)."""

    __tablename__ = "adapter_tags"
    __table_args__ = (
        UniqueConstraint("adapter_id", "key"),
        Index("ix_adapter_tags_key_value_adapter_id", "key", "value", "adapter_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    adapter_id: Mapped[int] = mapped_column(ForeignKey("adapter_versions.id"), index=True)
    key: Mapped[str] = mapped_column(String(64))
    value: Mapped[str] = mapped_column(String(256))


class SqlChannel(Base):
    __tablename__ = "channels"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    backbone_id: Mapped[int] = mapped_column(ForeignKey("backbones.id"), index=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # benchmark names every promotion's gate must judge (`weact channel require`); none: []
    required_benchmarks: Mapped[list[str]] = mapped_column(default=list, server_default="[]")

    backbone: Mapped[SqlBackbone] = relationship(lazy="joined", innerjoin=True)


class SqlRevision(Base):
    __tablename__ = "revisions"
    __table_args__ = (UniqueConstraint("channel_id", "revision"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    channel_id: Mapped[int] = mapped_column(ForeignKey("channels.id"), index=True)
    revision: Mapped[int] = mapped_column(Integer)
    library: Mapped[dict[str, Any]] = mapped_column()
    order: Mapped[list[str]] = mapped_column("order_list")
    library_digest: Mapped[str] = mapped_column(DIGEST, index=True)
    created_by: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    reason: Mapped[str | None] = mapped_column(Text, default=None)

    channel: Mapped[SqlChannel] = relationship(lazy="joined", innerjoin=True)


class SqlBenchmark(Base):
    __tablename__ = "benchmarks"
    __table_args__ = (UniqueConstraint("name", "version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(128))
    version: Mapped[int] = mapped_column(Integer)
    dataset_digest: Mapped[str] = mapped_column(DIGEST)
    scope: Mapped[str] = mapped_column(String(64), index=True)
    metric: Mapped[str] = mapped_column(String(64))
    direction: Mapped[str] = mapped_column(String(8))
    tolerance: Mapped[float] = mapped_column(Float)
    created_by: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class SqlEvaluation(Base):
    __tablename__ = "evaluations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    benchmark_id: Mapped[int] = mapped_column(ForeignKey("benchmarks.id"), index=True)
    library_digest: Mapped[str | None] = mapped_column(DIGEST, index=True, default=None)
    adapter_id: Mapped[int | None] = mapped_column(
        ForeignKey("adapter_versions.id"), index=True, default=None
    )
    score: Mapped[float] = mapped_column(Float)
    n: Mapped[int] = mapped_column(Integer)
    items_digest: Mapped[str | None] = mapped_column(DIGEST, default=None)
    # per-item scores {item id: score} (the paired gate reads them in its own transaction)
    items: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)
    # where the scores come from: dataset digest, engine, policy, code version, ...
    provenance: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)
    created_by: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    benchmark: Mapped[SqlBenchmark] = relationship(lazy="joined", innerjoin=True)


class SqlGateReport(Base):
    __tablename__ = "gate_reports"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    channel: Mapped[str] = mapped_column(String(64), index=True)
    base_revision: Mapped[int] = mapped_column(Integer)
    library_digest: Mapped[str] = mapped_column(DIGEST)
    passed: Mapped[bool] = mapped_column(Boolean)
    report: Mapped[dict[str, Any]] = mapped_column()
    created_by: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class SqlNode(Base):
    __tablename__ = "nodes"

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    channel: Mapped[str] = mapped_column(String(64))
    revision: Mapped[int | None] = mapped_column(Integer)
    audit: Mapped[dict[str, Any]] = mapped_column()
    audit_ok: Mapped[bool] = mapped_column(Boolean)
    last_heartbeat: Mapped[datetime] = mapped_column(default=utcnow)
    library_digest: Mapped[str | None] = mapped_column(String(64))  # of the revision served
    stale: Mapped[bool] = mapped_column(Boolean, default=False)  # node cannot reach registry
    lag: Mapped[int | None] = mapped_column(Integer)  # revisions behind the head it knows
    heartbeat_s: Mapped[float | None] = mapped_column(Float)  # its stated interval


class SqlBlobLease(Base):
    """When a blob was last PUT: ``weact gc`` spares it for its grace period after that."""

    __tablename__ = "blob_leases"

    digest: Mapped[str] = mapped_column(DIGEST, primary_key=True)
    put_at: Mapped[datetime] = mapped_column(default=utcnow)


class SqlEvent(Base):
    """Append-only, hash-chained audit log; unique prev_hash makes a fork impossible."""

    __tablename__ = "events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    actor: Mapped[str] = mapped_column(String(128))
    action: Mapped[str] = mapped_column(String(64), index=True)
    subject: Mapped[str] = mapped_column(String(256))
    payload: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column()
    prev_hash: Mapped[str] = mapped_column(DIGEST, unique=True)
    hash: Mapped[str] = mapped_column(DIGEST, unique=True)


class SqlTrustRoot(Base):
    """One version of the root of trust this registry serves (registry.trust): the TUF root
    metadata as its admins signed it. Nodes fetch the versions after theirs and verify each
    against the one before (TUF's rotation rule); the registry vouches for none of them."""

    __tablename__ = "trust_roots"

    version: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    metadata_json: Mapped[str] = mapped_column("metadata", Text)
    development: Mapped[bool] = mapped_column(Boolean, default=False)
    created_by: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class SqlAdapterSignature(Base):
    """A DSSE envelope signing an adapter's identity (registry.trust): by its publisher or
    an approver. Stored and served as given; what counts is decided by the offline root."""

    __tablename__ = "adapter_signatures"
    __table_args__ = (UniqueConstraint("adapter_id", "kind", "keyid"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    adapter_id: Mapped[int] = mapped_column(ForeignKey("adapter_versions.id"), index=True)
    kind: Mapped[str] = mapped_column(String(16))  # publish | approve
    keyid: Mapped[str] = mapped_column(String(128))
    envelope: Mapped[dict[str, Any]] = mapped_column()
    created_by: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class SqlRevisionSignature(Base):
    """An approver's signature of a channel revision's TUF metadata (registry.trust.channel),
    `{"keyid", "sig"}`. Stored and served as given; what counts is decided by the root."""

    __tablename__ = "revision_signatures"
    __table_args__ = (UniqueConstraint("revision_id", "keyid"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    revision_id: Mapped[int] = mapped_column(ForeignKey("revisions.id"), index=True)
    keyid: Mapped[str] = mapped_column(String(128))
    signature: Mapped[dict[str, Any]] = mapped_column()
    created_by: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


def _parent_name() -> Any:
    """`write@3`, the parent's name, read in the same SELECT as the version (a correlated
    subquery: no query per row, nor per generation of a line)."""
    parent = aliased(SqlAdapterVersion)
    return (
        select(SqlCapability.name.concat("@").concat(cast(parent.version, String)))
        .select_from(parent)
        .join(SqlCapability, SqlCapability.id == parent.capability_id)
        .where(parent.id == SqlAdapterVersion.parent_id)
        .correlate_except(parent, SqlCapability)
        .scalar_subquery()
    )


SqlAdapterVersion.parent_name = column_property(  # type: ignore[assignment]
    _parent_name(), deferred=False
)
