"""Processes: ``processes``, ``process``, ``cancel``, ``clear`` and ``run`` (an action now, recorded
like any scheduled run)."""

from __future__ import annotations

import argparse
import logging
import sys
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt import services
from airflow_tablemgmt.cli.common import logs_to_stderr, open_store, positive_seconds
from airflow_tablemgmt.cli.cost import core, size
from airflow_tablemgmt.cli.output import Output, add_output_option
from airflow_tablemgmt.core.process import Process, ProcessStatus
from airflow_tablemgmt.services.processes import timings

if TYPE_CHECKING:
    from airflow_tablemgmt.store import Store


def _when(t: datetime | None) -> str:
    return t.isoformat(timespec="seconds") if t else ""


def _secs(s: float | None) -> str:
    return f"{s:.1f}s" if s is not None else ""


def _with_timings(p: Process) -> dict[str, Any]:
    """A process as a document with its times (``services.processes.timings``: the REST API's too)."""
    return {**p.to_dict(), "timings": timings(p)}


def cmd_processes(args: argparse.Namespace) -> int:
    procs = services.list_processes(
        open_store(args, create=False),
        table=args.table,
        action=args.action,
        status=services.parse_status(args.status),
        limit=args.limit,
    )
    rows = []
    for p in procs:
        t = timings(p)
        rows.append(
            [
                p.id,
                p.table_id,
                p.action,
                p.instant.isoformat(timespec="seconds"),
                p.status,
                p.attempt,
                _when(p.started_at),
                _when(p.finished_at),
                _secs(t["lease_wait_s"]),
                _secs(t["queue_wait_s"]),
                _secs(t["run_s"]),
                _secs(t["job_s"]),
                _secs(t["total_s"]),
                core(p.core_seconds),
                size(p.bytes_read),
                size(p.bytes_written),
                p.engine,
                _reason(p),
            ]
        )
    Output(args).listing(
        [_with_timings(p) for p in procs],
        rows,
        [
            "ID",
            "TABLE",
            "ACTION",
            "INSTANT",
            "STATUS",
            "ATTEMPT",
            "STARTED",
            "FINISHED",
            "LEASE WAIT",
            "QUEUE WAIT",
            "RUN",
            "JOB",
            "TOTAL",
            "CORE-S",
            "READ",
            "WRITTEN",
            "ENGINE",
            "REASON",
        ],
    )
    return 0


def _reason(p: Process) -> str:
    """The failure's first line, or why a run was skipped (a declined run's summary, the health gate's with
    its figures: ``tablemgmt process <id>`` shows them all)."""
    summary = p.summary or {}
    text = p.failure_reason or (str(summary.get("reason") or "") if summary.get("skipped") else "")
    return text.splitlines()[0][:60] if text else ""


def cmd_process(args: argparse.Namespace) -> int:
    Output(args).one(_with_timings(services.get_process(open_store(args, create=False), args.id)))
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    result = services.cancel_process(open_store(args, create=False), args.id)
    print(f"process {args.id}: {result.status}")
    return 0 if result.accepted else 1


def cmd_clear(args: argparse.Namespace) -> int:
    results = services.clear_table(open_store(args, create=False), args.table)
    for r in results:
        instant = r.instant.isoformat() if r.instant else ""
        print(f"process {r.process_id} ({r.action} at {instant}): {r.status}")
    print(f"{args.table}: {len(results)} process(es) canceled")
    return 0


def _log_without_airflow() -> None:
    """Progress lines (``tablemgmt: submitting ...``, Spark's output) on stderr when Airflow, which
    would have configured logging on import, has not been imported (a run with ``--store-url`` and a
    Spark connection from the environment needs no Airflow)."""
    root = logging.getLogger()
    if "airflow" in sys.modules or root.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("[%(asctime)s] %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(logging.INFO)


def cmd_run(args: argparse.Namespace) -> int:
    # From its module: ``services.run_now`` is also a submodule's name, which shadows the function
    # once something imports that submodule.
    from airflow_tablemgmt.services.processes import run_now

    instant = services.parse_instant(args.instant)
    store = None
    try:
        with logs_to_stderr():
            stale = timedelta(seconds=args.stale_after) if args.stale_after else None
            store = open_store(args)
            _log_without_airflow()
            result = run_now(
                store,
                args.table,
                args.action,
                instant,
                spark_conn_id=args.spark_conn_id,
                stale_after=stale,
            )
    except Exception as e:
        # A script still gets its document on stdout (outside logs_to_stderr): the failed process, or the error.
        if Output(args).document:
            Output(args).one(_failed_run(store, args.table, args.action, instant, e))
        raise  # the one error line on stderr and the exit status, as for any failed command
    Output(args).one(result.to_dict())
    return 0


def _failed_run(
    store: Store | None, table: str, action: str, instant: datetime, error: Exception
) -> dict[str, Any]:
    """The document of a run that raised: the process it recorded (status, reason, summary so far) when it
    got that far, else no process and the error (an unknown table or action, a refused instant)."""
    try:
        process = store.processes.find(table, action, instant) if store is not None else None
    except Exception:  # noqa: BLE001 - the store itself failed: the error says so
        process = None
    if process is None:
        return {"process": None, "status": None, "error": str(error)}
    return {
        "process": process.id,
        "status": str(process.status),
        "attempt": process.attempt,
        "reused": False,
        "summary": process.summary or {},
        "failure_reason": process.failure_reason,
        "error": str(error),
    }


def add_parsers(sub: Any) -> None:
    ps = sub.add_parser("processes", help="list processes, newest first")
    ps.add_argument("--table")
    ps.add_argument("--action")
    ps.add_argument(
        "--status", choices=[s.value.lower() for s in ProcessStatus] + [s.value for s in ProcessStatus]
    )
    ps.add_argument("--limit", type=int, default=50)
    add_output_option(ps)
    ps.set_defaults(func=cmd_processes)

    pr = sub.add_parser("process", help="one process in full")
    pr.add_argument("id", type=int)
    add_output_option(pr)
    pr.set_defaults(func=cmd_process)

    cn = sub.add_parser("cancel", help="cancel a pending or running process")
    cn.add_argument("id", type=int)
    cn.set_defaults(func=cmd_cancel)

    cl = sub.add_parser("clear", help="cancel everything pending or running for a table")
    cl.add_argument("table")
    cl.set_defaults(func=cmd_clear)

    rn = sub.add_parser("run", help="run an action now, outside the schedule, recorded like any other")
    rn.add_argument("table")
    rn.add_argument("action")
    rn.add_argument("--instant", help="ISO time of the process (default: now)")
    rn.add_argument("--spark-conn-id", default="spark_default")
    rn.add_argument(
        "--stale-after",
        type=positive_seconds,
        metavar="SECONDS",
        help="treat a SUBMITTED/RUNNING process without a heartbeat for this long as orphaned (default: 90)",
    )
    add_output_option(rn)
    rn.set_defaults(func=cmd_run)
