"""Dynamic tables (FLIP-435): ``tablemgmt dt create|list|show|history|suspend|resume|alter|drop|refresh``.

Every command imports :mod:`airflow_tablemgmt.services.dynamic` inside its function: a maintenance
run's start-up never loads the dynamic-table services."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from airflow_tablemgmt import services
from airflow_tablemgmt.cli.common import logs_to_stderr, open_store, pairs
from airflow_tablemgmt.cli.output import Output, add_output_option

REFRESH_MODE_HELP = (
    "AUTO (default: incremental where the query allows it, else full, recording why), FULL, or INCREMENTAL "
    "(refused, naming the construct, for a query that cannot be maintained incrementally)"
)


def _pauser(dag_id: str, paused: bool) -> None:
    """Airflow's pause flag through its metadata DB. If Airflow is not reachable from here the table's
    state still changes (its scheduled runs skip while SUSPENDED) and a warning says so."""
    try:
        with logs_to_stderr():
            from airflow_tablemgmt.hooks.airflow_dags import set_dag_paused

            set_dag_paused(dag_id, paused)
    except Exception as e:  # noqa: BLE001 - the store's state is the source of truth; say what failed
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        print(
            f"warning: could not {'pause' if paused else 'unpause'} DAG {dag_id} in Airflow "
            f"({type(e).__name__}: {first}); run `airflow dags {'pause' if paused else 'unpause'} {dag_id}`",
            file=sys.stderr,
        )


def _mode_text(mode: dict[str, Any]) -> str:
    """``AUTO -> FULL``: the declared mode and the one its refreshes get (``refused`` when INCREMENTAL is
    not possible for the query)."""
    got = mode.get("mode") or "refused"
    return mode["declared"] if got == mode["declared"] else f"{mode['declared']} -> {got}"


def _dt_row(v: Any) -> list[Any]:
    last = v.last_refresh
    return [
        v.table.id,
        v.table.state,
        v.freshness,
        v.cron or "(after upstream)",
        _mode_text(v.refresh_mode),
        str(v.table.managed_by),
        f"{last.id} {last.status}" if last else "",
        v.table.consecutive_failures,
    ]


def cmd_dt_create(args: argparse.Namespace) -> int:
    from airflow_tablemgmt.core.tables import Owner
    from airflow_tablemgmt.services import dynamic

    data: dict[str, Any] = services.load_spec_file(args.file) if args.file else {}
    if args.identifier:
        data["identifier"] = args.identifier
    for key, value in (
        ("query", args.query),
        ("freshness", args.freshness),
        ("time-zone", args.time_zone),
        ("owner", args.owner),
        ("queue", args.queue),
        ("priority", args.priority),
        ("retries", args.retries),
        ("retry-delay", args.retry_delay),
        ("suspend-after-failures", args.suspend_after_failures),
        ("refresh-mode", args.refresh_mode),
        ("timeout", args.timeout),
    ):
        if value is not None:
            data[key] = value
    if args.partitioned_by:
        data["partitioned-by"] = [c.strip() for v in args.partitioned_by for c in v.split(",") if c.strip()]
    for col, pattern in pairs(args.date_formatter, "--date-formatter", "day=yyyy-MM-dd").items():
        data[f"partition.fields.{col}.date-formatter"] = pattern
    if not data:
        raise services.InvalidInput(
            "dt create: give IDENTIFIER with --query and --freshness, or --file SPEC.yaml"
        )
    store = open_store(args)
    with logs_to_stderr():
        dt, process = dynamic.create(store, data, None, Owner.STORE, spark_conn_id=args.spark_conn_id)
    if Output(args).document:
        Output(args).one({"table": dt.to_dict(), "process": dynamic.history_row(process)})
    else:
        summary = process.summary or {}
        mode = dynamic.refresh_mode_view(dt)
        print(
            f"{dt.id}: created ({dt.state}); first refresh: process {process.id} {process.status}, "
            f"{summary.get('rows_written', 0)} rows\n"
            f"refresh mode {_mode_text(mode)}: {mode['reason']}"
        )
    return 0


def cmd_dt_list(args: argparse.Namespace) -> int:
    from airflow_tablemgmt.services import dynamic

    views = dynamic.list_(open_store(args, create=False))
    Output(args).listing(
        [v.to_dict() for v in views],
        [_dt_row(v) for v in views],
        ["TABLE", "STATE", "FRESHNESS", "CRON", "MODE", "MANAGED BY", "LAST REFRESH", "FAILURES"],
    )
    return 0


def cmd_dt_show(args: argparse.Namespace) -> int:
    from airflow_tablemgmt.services import dynamic

    Output(args).one(dynamic.get(open_store(args, create=False), args.table).to_dict())
    return 0


def cmd_dt_history(args: argparse.Namespace) -> int:
    from airflow_tablemgmt.services import dynamic

    rows = [
        dynamic.history_row(p)
        for p in dynamic.history(open_store(args, create=False), args.table, args.limit)
    ]
    out = []
    for r in rows:
        parts = ",".join("/".join(f"{k}={v}" for k, v in p.items()) for p in r["partitions_written"])
        dur = f"{r['duration_seconds']:.1f}s" if isinstance(r["duration_seconds"], int | float) else ""
        out.append(
            [
                r["process_id"],
                r["schedule_time"],
                r["trigger"] or "",
                r["state"],
                r["refresh_action"] or "",
                r["refresh_mode"] or "",
                r["rows_written"] if r["rows_written"] is not None else "",
                parts[:40],
                dur,
                r["application_id"] or "",
                # why it failed, else why it was not incremental
                _first_line(r["reason"] or r["refresh_mode_reason"]),
            ]
        )
    Output(args).listing(
        rows,
        out,
        [
            "ID",
            "SCHEDULE TIME",
            "TRIGGER",
            "STATE",
            "ACTION",
            "MODE",
            "ROWS",
            "PARTITIONS",
            "DURATION",
            "APPLICATION",
            "REASON",
        ],
    )
    return 0


def _first_line(text: str | None, width: int = 60) -> str:
    return text.splitlines()[0][:width] if text else ""


def cmd_dt_suspend(args: argparse.Namespace) -> int:
    from airflow_tablemgmt.services import dynamic

    dt = dynamic.suspend(open_store(args, create=False), args.table, _pauser)
    print(f"{dt.id}: {dt.state}")
    return 0


def cmd_dt_resume(args: argparse.Namespace) -> int:
    from airflow_tablemgmt.services import dynamic

    options = pairs(args.option, "--option", "spark.sql.shuffle.partitions=8") if args.option else None
    dt = dynamic.resume(open_store(args, create=False), args.table, _pauser, options)
    print(f"{dt.id}: {dt.state}" + (f" (options: {dt.dynamic_options})" if dt.dynamic_options else ""))
    return 0


def cmd_dt_alter(args: argparse.Namespace) -> int:
    from airflow_tablemgmt.services import dynamic

    with logs_to_stderr():
        result = dynamic.alter(
            open_store(args, create=False),
            args.table,
            freshness=args.freshness,
            query=args.query,
            recreate=args.recreate,
            spark_conn_id=args.spark_conn_id,
            timeout=args.timeout,
            refresh_mode=args.refresh_mode,
        )
    print(
        f"{result.table.id}: altered {', '.join(result.changed)}"
        + (f"; recreated by process {result.process.id}" if result.process else "")
    )
    return 0


def cmd_dt_drop(args: argparse.Namespace) -> int:
    from airflow_tablemgmt.services import dynamic

    with logs_to_stderr():
        dt = dynamic.drop(
            open_store(args, create=False),
            args.table,
            purge=args.purge,
            pauser=_pauser,
            spark_conn_id=args.spark_conn_id,
        )
    print(
        f"{dt.id}: dropped"
        + (" (table purged)" if args.purge else " (the Iceberg table is kept; --purge drops it)")
    )
    return 0


def cmd_dt_refresh(args: argparse.Namespace) -> int:
    from airflow_tablemgmt.services import dynamic
    from airflow_tablemgmt.services.reap import reap_before_work

    with logs_to_stderr():
        store = open_store(args)
        reap_before_work(store)  # a CLI-only deployment has no operator start to reap for it
        process = dynamic.refresh_now(
            store,
            args.table,
            is_periodic=args.periodic,
            schedule_time=args.schedule_time,
            static_partitions=pairs(args.partition, "--partition", "day=2026-02-01"),
            dynamic_options=pairs(args.option, "--option", "spark.sql.shuffle.partitions=8"),
            spark_conn_id=args.spark_conn_id,
        )
    Output(args).one(dynamic.history_row(process))
    return 0


def add_parsers(sub: Any) -> None:
    dt = sub.add_parser("dt", help="dynamic tables (FLIP-435): a table bound to a query and a freshness")
    dsub = dt.add_subparsers(dest="dt_command", required=True)

    cr = dsub.add_parser(
        "create", help="create a dynamic table now: Spark creates it and runs its first refresh"
    )
    cr.add_argument("identifier", nargs="?", help="catalog.namespace.table")
    cr.add_argument("--file", help="a YAML/JSON definition (as under dynamic-tables: in tables.yaml)")
    cr.add_argument("--query", help="one Spark SQL SELECT over tables of registered catalogs")
    cr.add_argument("--freshness", help="'5 MINUTE', '1 HOUR', '1 DAY' or 'downstream'")
    cr.add_argument("--refresh-mode", help=REFRESH_MODE_HELP)
    cr.add_argument(
        "--partitioned-by", action="append", metavar="COLUMN", help="a partition column (repeat, or a,b)"
    )
    cr.add_argument(
        "--date-formatter",
        action="append",
        metavar="COLUMN=PATTERN",
        help="partition.fields.COLUMN.date-formatter, e.g. day=yyyy-MM-dd",
    )
    cr.add_argument("--time-zone", help="IANA zone the partition values are formatted in (default UTC)")
    cr.add_argument("--owner")
    cr.add_argument("--queue")
    cr.add_argument("--priority", type=int)
    cr.add_argument("--retries", type=int)
    cr.add_argument("--retry-delay")
    cr.add_argument("--suspend-after-failures", type=int)
    cr.add_argument(
        "--timeout", help="how long one refresh may take, e.g. 30m (docs/scheduling.md, Time limits)"
    )
    cr.add_argument("--spark-conn-id", default="spark_default")
    add_output_option(cr)
    cr.set_defaults(func=cmd_dt_create)

    ls = dsub.add_parser("list", help="dynamic tables, their state, freshness and last refresh")
    add_output_option(ls)
    ls.set_defaults(func=cmd_dt_list)

    sh = dsub.add_parser("show", help="a dynamic table's definition, state, schedule and last refresh")
    sh.add_argument("table")
    add_output_option(sh)
    sh.set_defaults(func=cmd_dt_show)

    hi = dsub.add_parser("history", help="refresh history, newest first (Snowflake's columns)")
    hi.add_argument("table")
    hi.add_argument("--limit", type=int, default=20)
    add_output_option(hi)
    hi.set_defaults(func=cmd_dt_history)

    su = dsub.add_parser("suspend", help="pause the refresh DAG; the table keeps its data")
    su.add_argument("table")
    su.set_defaults(func=cmd_dt_suspend)

    re_ = dsub.add_parser("resume", help="unpause the refresh DAG (clears the failure count)")
    re_.add_argument("table")
    re_.add_argument(
        "--option", action="append", metavar="KEY=VALUE", help="a dynamic option for later refreshes"
    )
    re_.set_defaults(func=cmd_dt_resume)

    al = dsub.add_parser(
        "alter", help="change the freshness (reschedules), the query, the timeout or the refresh mode"
    )
    al.add_argument("table")
    al.add_argument("--freshness")
    al.add_argument("--query")
    al.add_argument("--timeout", help="how long one refresh may take, e.g. 30m")
    al.add_argument("--refresh-mode", help=REFRESH_MODE_HELP)
    al.add_argument(
        "--recreate",
        action="store_true",
        help="when the new query's schema differs: drop and recreate the table from it",
    )
    al.add_argument("--spark-conn-id", default="spark_default")
    al.set_defaults(func=cmd_dt_alter)

    dr = dsub.add_parser("drop", help="remove the refresh workflow; --purge also drops the table")
    dr.add_argument("table")
    dr.add_argument("--purge", action="store_true", help="also drop the Iceberg table and its files")
    dr.add_argument("--spark-conn-id", default="spark_default")
    dr.set_defaults(func=cmd_dt_drop)

    rf = dsub.add_parser("refresh", help="refresh now, here, recorded as a refresh process")
    rf.add_argument("table")
    rf.add_argument("--periodic", action="store_true", help="a periodic refresh at --schedule-time")
    rf.add_argument("--schedule-time", help="yyyy-MM-dd HH:mm:ss (UTC); required with --periodic")
    rf.add_argument(
        "--partition", action="append", metavar="COLUMN=VALUE", help="a static partition to refresh"
    )
    rf.add_argument(
        "--option", action="append", metavar="KEY=VALUE", help="a dynamic option for this refresh"
    )
    rf.add_argument("--spark-conn-id", default="spark_default")
    add_output_option(rf)
    rf.set_defaults(func=cmd_dt_refresh)
