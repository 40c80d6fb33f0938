"""``main``: parse, run one command, turn every failure a user can cause into one ``error: ...`` line.

Every failure ends as that line on stderr and a non-zero exit, never a traceback, never a password.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from airflow_tablemgmt import services
from airflow_tablemgmt.cli import output
from airflow_tablemgmt.cli.common import DEBUG_ENV, collector_off_for_start_up, end_of_process
from airflow_tablemgmt.core.errors import TableMgmtError


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. ``argv`` None means this process's own command line (the ``tablemgmt``
    script): then the garbage collector stays off during the command's start-up
    (:func:`~airflow_tablemgmt.cli.common.start_up_done`) and the process ends as a short-lived one
    should (:func:`~airflow_tablemgmt.cli.common.end_of_process`). A caller that passes ``argv`` (a
    test, another program) keeps its collector as it is."""
    own_process = argv is None
    if own_process:
        collector_off_for_start_up()
    try:
        return _main(argv)
    finally:
        if own_process:
            end_of_process()


def _error(message: str) -> int:
    from airflow_tablemgmt.store.urls import hide_password

    print(f"error: {hide_password(message)}", file=sys.stderr)
    return 2


def _main(argv: Sequence[str] | None) -> int:
    from airflow_tablemgmt.cli.parser import build_parser

    args = build_parser().parse_args(argv)
    output.resolve(args)
    try:
        return int(args.func(args))
    except services.DeclarationsRejected as e:
        for message in e.errors:
            print(f"error: {message}", file=sys.stderr)
        print(f"nothing applied: {len(e.errors)} error(s) in {e.source}", file=sys.stderr)
        return 2
    except TableMgmtError as e:
        return _error(str(e))
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # a bug or an environment problem: one line, the traceback only on request
        if os.environ.get(DEBUG_ENV):
            raise
        return _error(
            f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''} "
            f"(set {DEBUG_ENV}=1 to see the traceback)"
        )


if __name__ == "__main__":
    sys.exit(main())
