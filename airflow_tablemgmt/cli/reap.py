"""``tablemgmt reap``: close the processes whose worker is gone (the same service as REST's)."""

from __future__ import annotations

import argparse
from datetime import timedelta
from typing import Any

from airflow_tablemgmt.cli.common import open_store, positive_seconds
from airflow_tablemgmt.cli.output import add_output_option, emit


def cmd_reap(args: argparse.Namespace) -> int:
    from airflow_tablemgmt.services.reap import DEFAULT_STALE_AFTER, reap_processes

    kwargs: dict[str, Any] = {
        "stale_after": timedelta(seconds=args.stale_after) if args.stale_after else DEFAULT_STALE_AFTER
    }
    if args.pending_after:
        kwargs["pending_after"] = timedelta(seconds=args.pending_after)
    reaped = reap_processes(open_store(args, create=False), **kwargs)
    if args.json:
        emit([r.to_dict() for r in reaped], args)
        return 0
    for r in reaped:
        print(
            f"process {r.process_id} ({r.table_id} {r.action} at {r.instant.isoformat()}): {r.was} -> {r.status}"
        )
    print(f"{len(reaped)} process(es) reaped")
    return 0


def add_parser(sub: Any) -> None:
    rp = sub.add_parser(
        "reap",
        help="close processes whose worker is gone (no heartbeat for --stale-after; PENDING after --pending-after)",
    )
    rp.add_argument(
        "--stale-after",
        type=positive_seconds,
        metavar="SECONDS",
        help="SUBMITTED/RUNNING/CANCELING without a heartbeat this long (default 90; never less "
        "than two beats of the interval the row's worker promised)",
    )
    rp.add_argument(
        "--pending-after",
        type=positive_seconds,
        metavar="SECONDS",
        help="PENDING without a sign of life this long (default 900)",
    )
    add_output_option(rp)
    rp.set_defaults(func=cmd_reap)
