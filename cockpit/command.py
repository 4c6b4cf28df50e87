"""The `cockpit` command as installed: the early OpenSSH master first, then the CLI.

This module imports nothing of the cockpit before the fork (cockpit/remote/early_master.py):
`import cockpit.cli` alone takes 0.06 s, and the unit's state reaches the screen only after
the master's login and first command.
"""

from __future__ import annotations

import sys


def console() -> None:
    from cockpit.remote.early_master import fork, import_yielding

    if fork(sys.argv[1:]):
        import_yielding("cockpit.cli")  # while the master logs in: its 60 ms at nice 19
    from cockpit.cli import console as run

    run()
