"""Alembic migrations over ``registry.db.models.Base.metadata`` (see registry.db.migrate)."""
