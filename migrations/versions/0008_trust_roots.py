"""trust roots (signed trust: the root versions a registry serves to its nodes)

Revision ID: 0008
Revises: 0007

- ``trust_roots``: each version of the TUF root metadata the registry serves, as its admins
  signed it; ``development`` marks a root the registry generated for itself (no --root).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "trust_roots",
        sa.Column("version", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("metadata", sa.Text(), nullable=False),
        sa.Column("development", sa.Boolean(), nullable=False),
        sa.Column("created_by", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("trust_roots")
