"""principals as identities, node tokens bound to a node id, blob leases for gc

Revision ID: 0002
Revises: 0001

- ``principals``: one row per identity; every token belongs to one. Existing tokens get the
  principal of their name (the old rule: tokens with one name are one person).
- ``tokens.node_id``: the node a node token may report as (set at creation or on its first
  heartbeat).
- ``adapter_versions.created_by_id``: the principal that published, for the self-approval
  rule (backfilled from ``created_by`` where a principal of that name exists).
- ``blob_leases``: when each blob was last PUT, so that ``weact gc`` spares fresh uploads.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _backfill() -> None:
    op.execute(
        "INSERT INTO principals (name, created_at) "
        "SELECT name, MIN(created_at) FROM tokens GROUP BY name"
    )
    op.execute(
        "UPDATE tokens SET principal_id = "
        "(SELECT principals.id FROM principals WHERE principals.name = tokens.name)"
    )
    op.execute(
        "UPDATE adapter_versions SET created_by_id = "
        "(SELECT principals.id FROM principals WHERE principals.name = adapter_versions.created_by)"
    )


def upgrade() -> None:
    op.create_table(
        "principals",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_principals")),
        sa.UniqueConstraint("name", name=op.f("uq_principals_name")),
    )
    op.create_table(
        "blob_leases",
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("put_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("digest", name=op.f("pk_blob_leases")),
    )
    with op.batch_alter_table("tokens", schema=None) as batch_op:
        batch_op.add_column(sa.Column("principal_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("node_id", sa.String(length=128), nullable=True))
    with op.batch_alter_table("adapter_versions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("created_by_id", sa.Integer(), nullable=True))
    _backfill()
    with op.batch_alter_table("tokens", schema=None) as batch_op:
        batch_op.alter_column("principal_id", existing_type=sa.Integer(), nullable=False)
        batch_op.create_index(batch_op.f("ix_tokens_principal_id"), ["principal_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_tokens_node_id"), ["node_id"], unique=False)
        batch_op.create_foreign_key(
            batch_op.f("fk_tokens_principal_id_principals"), "principals", ["principal_id"], ["id"]
        )
    with op.batch_alter_table("adapter_versions", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_adapter_versions_created_by_id"), ["created_by_id"], unique=False
        )
        batch_op.create_foreign_key(
            batch_op.f("fk_adapter_versions_created_by_id_principals"),
            "principals",
            ["created_by_id"],
            ["id"],
        )


def downgrade() -> None:
    with op.batch_alter_table("adapter_versions", schema=None) as batch_op:
        batch_op.drop_constraint(
            batch_op.f("fk_adapter_versions_created_by_id_principals"), type_="foreignkey"
        )
        batch_op.drop_index(batch_op.f("ix_adapter_versions_created_by_id"))
        batch_op.drop_column("created_by_id")
    with op.batch_alter_table("tokens", schema=None) as batch_op:
        batch_op.drop_constraint(
            batch_op.f("fk_tokens_principal_id_principals"), type_="foreignkey"
        )
        batch_op.drop_index(batch_op.f("ix_tokens_node_id"))
        batch_op.drop_index(batch_op.f("ix_tokens_principal_id"))
        batch_op.drop_column("node_id")
        batch_op.drop_column("principal_id")
    op.drop_table("blob_leases")
    op.drop_table("principals")
