"""`weact` commands of the registry, one module per group (mounted lazily by cli/main.py).

    base.py      `fail_cleanly` for the registry's errors (and the gate's refusal), and
                 `client_command` (--registry/--token/--json, a client and an `Output`)
    render.py    the registry's tables: adapters, lineage, revisions, gate reports
    server.py    serve (checks the blob store first), db upgrade (the database directly)
    tokens.py    token create|list|revoke|rebind (the registry with an admin token, else the
                 database)
    catalog.py   backbone, capability
    adapters.py  adapter push|pull|list|show|lineage, approve, reject, revoke
    channels.py  promote, gate, rollback, channel list|show|revisions|wait
    audit.py     audit events
    nodes.py     nodes (the fleet: revision served vs channel head, lag, audit, stale)

Every command but those of `server.py` is an HTTP client of a running registry built on
`registry.client`: a rich table for people, `--json` for scripts. What every package's CLI
shares (exit codes, options, output, progress) is `clikit`, outside the registry.
"""
