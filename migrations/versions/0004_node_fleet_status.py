"""node fleet status: library digest, stale flag and lag in each node's record

Revision ID: 0004
Revises: 0003

Written after main's head (0002_evaluation_items); re-chain it at merge if another
migration lands first.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.add_column(sa.Column("library_digest", sa.String(length=64), nullable=True))
        batch.add_column(
            sa.Column("stale", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch.add_column(sa.Column("lag", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("lag")
        batch.drop_column("stale")
        batch.drop_column("library_digest")
