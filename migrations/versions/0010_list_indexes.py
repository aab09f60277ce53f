"""indexes that keep adapter lists flat as the table grows

Revision ID: 0010
Revises: 0009

A page of versions filtered by state, or by capability and state, is read in id order: with
`(state, id)` and `(capability_id, state, id)` the database walks the index in that order and
stops after the page, instead of gathering every match and sorting it; the counts by
capability and state (the capabilities page) and by state (the overview) read these indexes
alone. They replace the one-column indexes they start with. A tag filter reads `(key, value,
adapter_id)` alone, without visiting the table.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

REPLACED = {  # old index -> (new index, table, columns)
    "ix_adapter_versions_capability_id": (
        "ix_adapter_versions_capability_id_state_id",
        "adapter_versions",
        ["capability_id", "state", "id"],
    ),
    "ix_adapter_versions_state": (
        "ix_adapter_versions_state_id",
        "adapter_versions",
        ["state", "id"],
    ),
    "ix_adapter_tags_key_value": (
        "ix_adapter_tags_key_value_adapter_id",
        "adapter_tags",
        ["key", "value", "adapter_id"],
    ),
}
OLD_COLUMNS = {
    "ix_adapter_versions_capability_id": ["capability_id"],
    "ix_adapter_versions_state": ["state"],
    "ix_adapter_tags_key_value": ["key", "value"],
}


def upgrade() -> None:
    for old, (new, table, columns) in REPLACED.items():
        op.create_index(new, table, columns)
        op.drop_index(old, table_name=table)


def downgrade() -> None:
    for old, (new, table, _) in REPLACED.items():
        op.create_index(old, table, OLD_COLUMNS[old])
        op.drop_index(new, table_name=table)
