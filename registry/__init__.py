"""WeAct adapter registry: FastAPI service, services, ORM, gates, audit log, auth.

The registry never imports torch, transformers or peft: the service installs without them.
"""
