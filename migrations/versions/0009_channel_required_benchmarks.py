"""channels' required benchmarks (gates that cannot pass by accident)

Revision ID: 0009
Revises: 0008

- ``channels.required_benchmarks``: the benchmark names every promotion's gate must judge
  (a JSON list; existing channels require none).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("channels") as batch_op:
        batch_op.add_column(
            sa.Column("required_benchmarks", sa.JSON(), nullable=False, server_default="[]")
        )


def downgrade() -> None:
    with op.batch_alter_table("channels") as batch_op:
        batch_op.drop_column("required_benchmarks")
