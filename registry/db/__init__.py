"""Persistence: ORM models (``Sql*``), engine and sessions, migrations."""
