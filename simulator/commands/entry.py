"""The `clustersim` script: the command line, with Ctrl-C while it is still loading said on
one line (exit 130) rather than as a traceback.

The commands install their own handlers once they start (a stopped run reports what it left,
`simulator.commands.run.interrupted`); before that, the interpreter is importing the
command line (typer, rich) and has written nothing, which is what the line says.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Entry point of the `clustersim` script (`simulator.commands.app.main`, guarded)."""
    try:
        from simulator.commands.app import main as app_main
    except KeyboardInterrupt:
        _stopped()
    app_main()


def _stopped() -> None:
    sys.stderr.write("interrupted (stopped by SIGINT) before the command started; nothing was written\n")
    sys.exit(130)
