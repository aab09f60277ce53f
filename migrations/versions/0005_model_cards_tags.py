"""model cards, tags and content identity of adapter versions

Revision ID: 0005
Revises: 0004

- ``adapter_versions.card``: the text of the version's model card (its ``README.md``, also
  stored as a blob among its files), searchable;
- ``adapter_versions.content_digest``: sha256 over the digests of the adapter's config and
  weights; unique per capability and backbone, so identical bytes are one version (rows
  that were already duplicates keep a NULL, which the index ignores);
- ``adapter_tags``: ``key=value`` tags of a version, one value per key.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CONFIG = "adapter_config.json"
WEIGHTS = "adapter_model.safetensors"


def content_digest(files: dict[str, str]) -> str:
    body = f"{files.get(CONFIG, '')}\n{files.get(WEIGHTS, '')}"
    return hashlib.sha256(body.encode()).hexdigest()


def upgrade() -> None:
    with op.batch_alter_table("adapter_versions") as batch:
        batch.add_column(sa.Column("card", sa.Text(), nullable=True))
        batch.add_column(sa.Column("content_digest", sa.String(length=64), nullable=True))
    versions = sa.table(
        "adapter_versions",
        sa.column("id", sa.Integer),
        sa.column("capability_id", sa.Integer),
        sa.column("backbone_id", sa.Integer),
        sa.column("files", sa.JSON),
        sa.column("content_digest", sa.String),
    )
    bind = op.get_bind()
    seen: set[tuple[int, int, str]] = set()
    rows = bind.execute(
        sa.select(
            versions.c.id, versions.c.capability_id, versions.c.backbone_id, versions.c.files
        ).order_by(versions.c.id)
    ).all()
    for row in rows:
        files = row.files if isinstance(row.files, dict) else json.loads(row.files)
        key = (row.capability_id, row.backbone_id, content_digest(files))
        if key in seen:
            continue  # an earlier duplicate keeps the identity
        seen.add(key)
        bind.execute(versions.update().where(versions.c.id == row.id).values(content_digest=key[2]))
    op.create_index(
        "ix_adapter_versions_content",
        "adapter_versions",
        ["capability_id", "backbone_id", "content_digest"],
        unique=True,
    )
    op.create_table(
        "adapter_tags",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("adapter_id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("value", sa.String(length=256), nullable=False),
        sa.ForeignKeyConstraint(
            ["adapter_id"],
            ["adapter_versions.id"],
            name=op.f("fk_adapter_tags_adapter_id_adapter_versions"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_adapter_tags")),
        sa.UniqueConstraint("adapter_id", "key", name=op.f("uq_adapter_tags_adapter_id_key")),
    )
    op.create_index(op.f("ix_adapter_tags_adapter_id"), "adapter_tags", ["adapter_id"])
    op.create_index("ix_adapter_tags_key_value", "adapter_tags", ["key", "value"])


def downgrade() -> None:
    op.drop_index("ix_adapter_tags_key_value", table_name="adapter_tags")
    op.drop_index(op.f("ix_adapter_tags_adapter_id"), table_name="adapter_tags")
    op.drop_table("adapter_tags")
    op.drop_index("ix_adapter_versions_content", table_name="adapter_versions")
    with op.batch_alter_table("adapter_versions") as batch:
        batch.drop_column("content_digest")
        batch.drop_column("card")
