"""``tablemgmt cost``: what maintenance cost, per table, policy, day, action or status (any combination).

A command of its own rather than columns on ``tables``: a rollup groups processes across tables and days,
which neither the table list (one row per table, no time window) nor the process list (one row per
process) can show. Each process's own cost is on ``tablemgmt processes`` and ``tablemgmt process N``.
"""

from __future__ import annotations

import argparse
from typing import Any

from airflow_tablemgmt.cli.common import open_store
from airflow_tablemgmt.cli.output import Output, add_output_option
from airflow_tablemgmt.services.cost import cost_rollup, parse_by
from airflow_tablemgmt.store.process_cost import DIMENSIONS

_HEADERS = {"day": "DAY", "policy": "POLICY", "table": "TABLE", "action": "ACTION", "status": "STATUS"}


def size(n: int | None) -> str:
    """Bytes for a person: 1.5 GiB, 320 KiB, 12 B ('' when unknown)."""
    if n is None:
        return ""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # not reached


def core(seconds: float | None) -> str:
    return f"{seconds:.1f}" if seconds is not None else ""


def cmd_cost(args: argparse.Namespace) -> int:
    rows = cost_rollup(
        open_store(args, create=False),
        args.by,
        days=args.days,
        table=args.table,
        policy=args.policy,
        action=args.action,
        limit=args.limit,
    )
    wanted = parse_by(args.by)
    dims = [d for d in DIMENSIONS if d in wanted]
    lines: list[list[Any]] = []
    for r in rows:
        lines.append(
            [
                *[r.key[d] if r.key[d] is not None else "-" for d in dims],
                r.n,
                f"{r.measured}/{r.n}",
                core(r.core_seconds),
                core(r.cpu_seconds),
                size(r.bytes_read),
                size(r.bytes_written),
                r.files_removed,
                size(r.bytes_removed),
            ]
        )
    header = [
        *[_HEADERS[d] for d in dims],
        "RUNS",
        "MEASURED",
        "CORE-S",
        "CPU-S",
        "READ",
        "WRITTEN",
        "FILES REMOVED",
        "BYTES REMOVED",
    ]
    Output(args).listing([r.to_dict() for r in rows], lines, header)
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "cost",
        help="what maintenance cost (executor core-seconds, bytes read and written, files removed), rolled up",
        description="Executor core-seconds (task run time summed), CPU seconds, bytes read and written and "
        "files and bytes removed by the processes that finished in the last --days UTC days, grouped by "
        f"--by (any of {', '.join(DIMENSIONS)}, comma-separated; policy: the policy managing the table, '-' "
        "for a table declared on its own).",
    )
    p.add_argument(
        "--by", default="table", help="table (default), policy, day, action, status, or e.g. policy,day"
    )
    p.add_argument("--days", type=int, default=30, help="the last N UTC days, today included (default 30)")
    p.add_argument("--table", help="one table (catalog.namespace.table)")
    p.add_argument("--policy", help="the tables one policy manages")
    p.add_argument("--action", help="one action (rewrite-files ...)")
    p.add_argument("--limit", type=int, default=1000, help="at most this many groups (default 1000)")
    add_output_option(p)
    p.set_defaults(func=cmd_cost)
