"""What every `weact` command shares, whatever package it belongs to.

    errors.py    one line on stderr and an exit code for every failure (`fail_cleanly`)
    options.py   --token, --json (the registry URL option is `registry.client.url_cli`)
    output.py    results as rich renderables for people, JSON for scripts (`--json`), and
                 `stdout_to_stderr` (an engine's logs never reach stdout)
    tables.py    tables whose digests never fold (whole, or 12 characters and …), rows
    progress.py  progress of long steps and transfers on stderr (a tty, or WEACT_PROGRESS=1)

It imports nothing of the project (as `storage`): a package's CLI passes in the error types
its commands can meet and, where one needs more than its `code` and `detail`, a describer.
Library code never imports it: it reports progress through a callback that a CLI fills
with `progress.steps` or `progress.transfer_progress`.
"""
