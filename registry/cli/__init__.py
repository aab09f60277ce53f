"""`weact` commands of the registry, one module per group (mounted lazily by cli/main.py).

    errors.py    one line on stderr and an exit code for every failure (every package's CLI)
    options.py   --url / WEACT_URL, --token, --json, and `client_command`
    output.py    tables or JSON;  tables.py  the tables themselves
    progress.py  progress of long steps and transfers on stderr (a tty, or WEACT_PROGRESS=1)
    server.py    serve (checks the blob store first), db upgrade (the database directly)
    tokens.py    token create|list|revoke|rebind (the registry with an admin token, else the
                 database)
    catalog.py   backbone, capability
    adapters.py  adapter push|pull|list|show|lineage, approve, reject, revoke
    channels.py  promote, gate, rollback, channel list|show|revisions|wait
    audit.py     audit events
    nodes.py     nodes (the fleet: revision served vs channel head, lag, audit, stale)

Every command but those of `server.py` is an HTTP client of a running registry built on
`registry.client`: a rich table for people, `--json` for scripts.
"""
