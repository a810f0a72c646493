"""The ``logstore`` command's entry point (console script and ``python -m logstore_cli``).

Stop signals get our handler before anything heavy is imported: a Ctrl-C or SIGTERM while Typer,
Rich and the commands load is "interrupted" and exit 130, never a traceback from an import.
"""

from __future__ import annotations

import sys


def main() -> None:
    from logstore_cli import interrupt

    interrupt.install()
    try:
        from logstore_cli.cli.app import main as run_app
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        sys.exit(130)
    run_app()


if __name__ == "__main__":
    main()
