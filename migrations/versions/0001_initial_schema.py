"""initial schema

Revision ID: 0001
Revises:
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "backbones",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=256), nullable=False),
        sa.Column("root", sa.String(length=64), nullable=False),
        sa.Column("tensor_count", sa.Integer(), nullable=False),
        sa.Column("param_count", sa.BigInteger(), nullable=False),
        sa.Column("manifest_digest", sa.String(length=64), nullable=False),
        sa.Column("created_by", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_backbones")),
        sa.UniqueConstraint("root", name=op.f("uq_backbones_root")),
    )
    op.create_table(
        "benchmarks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("dataset_digest", sa.String(length=64), nullable=False),
        sa.Column("scope", sa.String(length=64), nullable=False),
        sa.Column("metric", sa.String(length=64), nullable=False),
        sa.Column("direction", sa.String(length=8), nullable=False),
        sa.Column("tolerance", sa.Float(), nullable=False),
        sa.Column("created_by", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_benchmarks")),
        sa.UniqueConstraint("name", "version", name=op.f("uq_benchmarks_name_version")),
    )
    with op.batch_alter_table("benchmarks", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_benchmarks_scope"), ["scope"], unique=False)

    op.create_table(
        "capabilities",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("order_index", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_capabilities")),
        sa.UniqueConstraint("name", name=op.f("uq_capabilities_name")),
    )
    op.create_table(
        "events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("actor", sa.String(length=128), nullable=False),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("subject", sa.String(length=256), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("prev_hash", sa.String(length=64), nullable=False),
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
        sa.UniqueConstraint("hash", name=op.f("uq_events_hash")),
        sa.UniqueConstraint("prev_hash", name=op.f("uq_events_prev_hash")),
    )
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_events_action"), ["action"], unique=False)

    op.create_table(
        "gate_reports",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("channel", sa.String(length=64), nullable=False),
        sa.Column("base_revision", sa.Integer(), nullable=False),
        sa.Column("library_digest", sa.String(length=64), nullable=False),
        sa.Column("passed", sa.Boolean(), nullable=False),
        sa.Column("report", sa.JSON(), nullable=False),
        sa.Column("created_by", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_gate_reports")),
    )
    with op.batch_alter_table("gate_reports", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_gate_reports_channel"), ["channel"], unique=False)

    op.create_table(
        "nodes",
        sa.Column("id", sa.String(length=128), nullable=False),
        sa.Column("channel", sa.String(length=64), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=True),
        sa.Column("audit", sa.JSON(), nullable=False),
        sa.Column("audit_ok", sa.Boolean(), nullable=False),
        sa.Column("last_heartbeat", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_nodes")),
    )
    op.create_table(
        "tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("revoked_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_tokens_token_hash")),
    )
    with op.batch_alter_table("tokens", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_tokens_name"), ["name"], unique=False)

    op.create_table(
        "adapter_versions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("capability_id", sa.Integer(), nullable=False),
        sa.Column("backbone_id", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("label", sa.String(length=128), nullable=True),
        sa.Column("parent_id", sa.Integer(), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.Column("alpha", sa.Float(), nullable=False),
        sa.Column("target_modules", sa.JSON(), nullable=False),
        sa.Column("files", sa.JSON(), nullable=False),
        sa.Column("manifest_root", sa.String(length=64), nullable=False),
        sa.Column("provenance", sa.JSON(), nullable=False),
        sa.Column("created_by", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("decided_by", sa.String(length=128), nullable=True),
        sa.Column("decided_at", sa.DateTime(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["backbone_id"],
            ["backbones.id"],
            name=op.f("fk_adapter_versions_backbone_id_backbones"),
        ),
        sa.ForeignKeyConstraint(
            ["capability_id"],
            ["capabilities.id"],
            name=op.f("fk_adapter_versions_capability_id_capabilities"),
        ),
        sa.ForeignKeyConstraint(
            ["parent_id"],
            ["adapter_versions.id"],
            name=op.f("fk_adapter_versions_parent_id_adapter_versions"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_adapter_versions")),
        sa.UniqueConstraint(
            "capability_id",
            "backbone_id",
            "version",
            name=op.f("uq_adapter_versions_capability_id_backbone_id_version"),
        ),
    )
    with op.batch_alter_table("adapter_versions", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_adapter_versions_backbone_id"), ["backbone_id"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_adapter_versions_capability_id"), ["capability_id"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_adapter_versions_manifest_root"), ["manifest_root"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_adapter_versions_parent_id"), ["parent_id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_adapter_versions_state"), ["state"], unique=False)

    op.create_table(
        "channels",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("backbone_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["backbone_id"], ["backbones.id"], name=op.f("fk_channels_backbone_id_backbones")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_channels")),
        sa.UniqueConstraint("name", name=op.f("uq_channels_name")),
    )
    with op.batch_alter_table("channels", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_channels_backbone_id"), ["backbone_id"], unique=False)

    op.create_table(
        "evaluations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("benchmark_id", sa.Integer(), nullable=False),
        sa.Column("library_digest", sa.String(length=64), nullable=True),
        sa.Column("adapter_id", sa.Integer(), nullable=True),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("items_digest", sa.String(length=64), nullable=True),
        sa.Column("created_by", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["adapter_id"],
            ["adapter_versions.id"],
            name=op.f("fk_evaluations_adapter_id_adapter_versions"),
        ),
        sa.ForeignKeyConstraint(
            ["benchmark_id"], ["benchmarks.id"], name=op.f("fk_evaluations_benchmark_id_benchmarks")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_evaluations")),
    )
    with op.batch_alter_table("evaluations", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_evaluations_adapter_id"), ["adapter_id"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_evaluations_benchmark_id"), ["benchmark_id"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_evaluations_library_digest"), ["library_digest"], unique=False
        )

    op.create_table(
        "revisions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("channel_id", sa.Integer(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("library", sa.JSON(), nullable=False),
        sa.Column("order_list", sa.JSON(), nullable=False),
        sa.Column("library_digest", sa.String(length=64), nullable=False),
        sa.Column("created_by", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["channel_id"], ["channels.id"], name=op.f("fk_revisions_channel_id_channels")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_revisions")),
        sa.UniqueConstraint(
            "channel_id", "revision", name=op.f("uq_revisions_channel_id_revision")
        ),
    )
    with op.batch_alter_table("revisions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_revisions_channel_id"), ["channel_id"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_revisions_library_digest"), ["library_digest"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("revisions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_revisions_library_digest"))
        batch_op.drop_index(batch_op.f("ix_revisions_channel_id"))

    op.drop_table("revisions")
    with op.batch_alter_table("evaluations", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_evaluations_library_digest"))
        batch_op.drop_index(batch_op.f("ix_evaluations_benchmark_id"))
        batch_op.drop_index(batch_op.f("ix_evaluations_adapter_id"))

    op.drop_table("evaluations")
    with op.batch_alter_table("channels", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_channels_backbone_id"))

    op.drop_table("channels")
    with op.batch_alter_table("adapter_versions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_adapter_versions_state"))
        batch_op.drop_index(batch_op.f("ix_adapter_versions_parent_id"))
        batch_op.drop_index(batch_op.f("ix_adapter_versions_manifest_root"))
        batch_op.drop_index(batch_op.f("ix_adapter_versions_capability_id"))
        batch_op.drop_index(batch_op.f("ix_adapter_versions_backbone_id"))

    op.drop_table("adapter_versions")
    with op.batch_alter_table("tokens", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_tokens_name"))

    op.drop_table("tokens")
    op.drop_table("nodes")
    with op.batch_alter_table("gate_reports", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_gate_reports_channel"))

    op.drop_table("gate_reports")
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_events_action"))

    op.drop_table("events")
    op.drop_table("capabilities")
    with op.batch_alter_table("benchmarks", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_benchmarks_scope"))

    op.drop_table("benchmarks")
    op.drop_table("backbones")
