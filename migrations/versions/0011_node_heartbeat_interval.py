"""nodes' heartbeat interval (a node is stale after 2 missed heartbeats)

Revision ID: 0011
Revises: 0010

- ``nodes.heartbeat_s``: the interval a node states in each heartbeat; the fleet view calls
  a node stale once it is silent for twice that (nodes that stated none: twice 10 s).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("nodes") as batch_op:
        batch_op.add_column(sa.Column("heartbeat_s", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("nodes") as batch_op:
        batch_op.drop_column("heartbeat_s")
