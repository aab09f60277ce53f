"""signed channel revisions (signed trust)

Revision ID: 0007
Revises: 0006

- ``revision_signatures``: approvers' signatures of a channel revision's TUF targets
  metadata (registry.trust.channel), one per key and revision.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "revision_signatures",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("revision_id", sa.Integer(), sa.ForeignKey("revisions.id"), nullable=False),
        sa.Column("keyid", sa.String(length=128), nullable=False),
        sa.Column("signature", sa.JSON(), nullable=False),
        sa.Column("created_by", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.UniqueConstraint("revision_id", "keyid"),
    )
    op.create_index("ix_revision_signatures_revision_id", "revision_signatures", ["revision_id"])


def downgrade() -> None:
    op.drop_index("ix_revision_signatures_revision_id", table_name="revision_signatures")
    op.drop_table("revision_signatures")
