"""Service functions: every decision lives here; collaborators are keyword-only.

Each function works inside the caller's session (one transaction per operation) and
returns frozen domain objects from ``registry.domain``.
"""
