"""adapter signatures (signed trust)

Revision ID: 0006
Revises: 0005

- ``adapter_signatures``: DSSE envelopes signing an adapter version's identity, by its
  publisher (``kind = publish``) or an approver (``approve``), one per key and kind.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "adapter_signatures",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("adapter_id", sa.Integer(), sa.ForeignKey("adapter_versions.id"), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("keyid", sa.String(length=128), nullable=False),
        sa.Column("envelope", sa.JSON(), nullable=False),
        sa.Column("created_by", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.UniqueConstraint("adapter_id", "kind", "keyid"),
    )
    op.create_index("ix_adapter_signatures_adapter_id", "adapter_signatures", ["adapter_id"])


def downgrade() -> None:
    op.drop_index("ix_adapter_signatures_adapter_id", table_name="adapter_signatures")
    op.drop_table("adapter_signatures")
