"""versions counted by capability and state

Revision ID: 0013
Revises: 0012

- ``version_counts``: how many versions of each capability are in each state, one row per
  pair that has any, kept by the services that register and decide versions in the same
  transaction. The capabilities page and ``/metrics`` read these rows instead of counting
  an index of every version (at 100,000 versions that count was the page's time: 5.5 ->
  11.7 ms p50 on SQLite from 1,000 versions, `bench/bench_scale.py`). Filled here from the
  existing versions.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "version_counts",
        sa.Column("capability_id", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["capability_id"],
            ["capabilities.id"],
            name=op.f("fk_version_counts_capability_id_capabilities"),
        ),
        sa.PrimaryKeyConstraint("capability_id", "state", name=op.f("pk_version_counts")),
    )
    op.execute(
        "INSERT INTO version_counts (capability_id, state, count) "
        "SELECT capability_id, state, count(*) FROM adapter_versions "
        "GROUP BY capability_id, state"
    )


def downgrade() -> None:
    op.drop_table("version_counts")
