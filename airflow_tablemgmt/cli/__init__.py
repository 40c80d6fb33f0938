"""The `tablemgmt` command: declare tables, inspect and steer processes.

Parsing and printing only: every command calls one function of :mod:`airflow_tablemgmt.services`, the
same the REST API calls, so both validate and answer identically. Every failure a user can cause ends
as one ``error: ...`` line on stderr and a non-zero exit, never a traceback, never a password.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
from collections.abc import Iterator, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt import services
from airflow_tablemgmt.cli import output
from airflow_tablemgmt.cli.output import add_output_option
from airflow_tablemgmt.core.errors import TableMgmtError
from airflow_tablemgmt.core.process import ProcessStatus

if TYPE_CHECKING:
    from airflow_tablemgmt.store import Store

DEBUG_ENV = "TABLEMGMT_DEBUG"  # set to 1 to see the traceback of an unexpected error


@contextlib.contextmanager
def _logs_to_stderr() -> Iterator[None]:
    """Airflow configures its logging on import with handlers bound to the ``sys.stdout`` of that
    moment; importing (and running) under this context sends those logs to stderr, so the command's
    own output on stdout (``--json``) stays parseable."""
    out = sys.stdout
    sys.stdout = sys.stderr
    try:
        yield
    finally:
        sys.stdout = out


def _store(args: argparse.Namespace, *, create: bool = True) -> Store:
    """The store named by --store-url, else by the tablemgmt_default connection (hook rules apply).

    ``create=False`` for commands that only read or remove: they never create a store file.
    """
    from airflow_tablemgmt.store import Store

    if args.store_url:
        store = Store.for_url(args.store_url, create=create)
    else:
        with _logs_to_stderr():
            from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook

            store = TableMgmtHook().get_store(create=create)
    store.ping()
    _start_up_done()
    return store


def _print(data: Any, args: argparse.Namespace) -> None:
    """A document in the format asked for (cli/output.py); YAML for a person."""
    output.emit(data, args)


def _table_rows(rows: list[list[Any]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(fmt.format(*map(str, r)) for r in [header, *rows])


def _properties(pairs: Sequence[str]) -> dict[str, str]:
    props: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise services.InvalidInput(
                f"--property: {pair!r} must look like KEY=VALUE, e.g. uri=https://host"
            )
        props[key] = value
    return props


# -- commands -------------------------------------------------------------------------------------
def cmd_db_upgrade(args: argparse.Namespace) -> int:
    store = _store(args)
    store.upgrade()
    print(f"store at revision {store.current_revision()}")
    return 0


def cmd_apply(args: argparse.Namespace) -> int:
    path = services.check_declarations_path(args.file)  # before the store is opened (or created)
    report = services.apply_file(
        _store(args), path, prune=not args.no_prune, allow_empty_prune=bool(args.prune)
    )
    print(f"applied {path}: {report}")
    if report.removed:
        print(f"removed (no longer declared in {path}): {', '.join(report.removed)}")
    return 0


def cmd_register(args: argparse.Namespace) -> int:
    spec = services.load_spec_file(args.file) if args.file else None
    req = services.RegisterRequest(
        table=args.table,
        spec=spec,
        format=args.format,
        owner=args.owner,
        queue=args.queue,
        priority=args.priority,
        actions=tuple(args.action or ()),
        options=services.parse_sets(args.set or []),
        replace_actions=args.replace_actions,
        catalog_type=args.catalog_type,
        warehouse=args.warehouse,
        source=args.file or "register",
    )
    if not args.table and spec is None:
        raise services.InvalidInput("register: give TABLE (catalog.namespace.table) or --file SPEC.yaml")
    result = services.register_table(_store(args), req)
    if result.catalog_created:
        print(f"catalog {result.table_id.split('.')[0]}: created")
    print(f"{result.table_id}: {result.outcome}")
    if result.removed_actions:
        print(f"{result.table_id}: removed actions: {', '.join(result.removed_actions)}")
    return 0


def cmd_catalog_set(args: argparse.Namespace) -> int:
    spec = services.build_catalog(
        args.name,
        type=args.type,
        warehouse=args.warehouse,
        properties=_properties(args.property or []),
        source="catalog set",
    )
    result = services.set_catalog(_store(args), spec)
    print(f"catalog {result.name}: {result.outcome}")
    return 0


def cmd_catalogs(args: argparse.Namespace) -> int:
    views = services.list_catalogs(_store(args, create=False))
    if args.json:
        _print([v.to_dict() for v in views], args)
        return 0
    rows = [[v.name, v.type, v.warehouse or "", ", ".join(f"{k}={x}" for k, x in v.properties.items())]
            for v in views]  # fmt: skip
    print(_table_rows(rows, ["CATALOG", "TYPE", "WAREHOUSE", "PROPERTIES"]))
    return 0


def _no_tables_note(args: argparse.Namespace, store: Store) -> str:
    """Which store was opened and how it was chosen: an empty list is often the wrong store (a new
    shell without the AIRFLOW_HOME or TABLEMGMT_STORE_URL that the tables were registered under)."""
    if args.store_url:
        source = "--store-url"
    else:
        with _logs_to_stderr():
            from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook

            source = TableMgmtHook().locate_store().source
    return (
        f"no tables in the store at {store.display_url} (from {source}); to use another store, set "
        "TABLEMGMT_STORE_URL or the tablemgmt_default connection (or AIRFLOW_HOME, whose "
        "tablemgmt.db is the default), or pass --store-url"
    )


def cmd_tables(args: argparse.Namespace) -> int:
    store = _store(args, create=False)
    rows = services.list_tables(store, include_removed=args.all)
    if not rows:
        print(_no_tables_note(args, store), file=sys.stderr if args.json else sys.stdout)
    if args.json:
        _print([{"table": r.table, "managed_by": r.managed_by, "actions": r.actions} for r in rows], args)
        return 0
    if not rows:
        return 0
    print(_table_rows(
        [[r.table, r.format, r.managed_by, r.owner, r.queue, ",".join(r.actions)] for r in rows],
        ["TABLE", "FORMAT", "MANAGED BY", "OWNER", "QUEUE", "ACTIONS"],
    ))  # fmt: skip
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    _print(services.show_table(_store(args, create=False), args.table), args)
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    services.remove_table(_store(args, create=False), args.table)
    print(f"{args.table}: removed")
    return 0


def cmd_processes(args: argparse.Namespace) -> int:
    procs = services.list_processes(
        _store(args, create=False),
        table=args.table,
        action=args.action,
        status=services.parse_status(args.status),
        limit=args.limit,
    )
    if args.json:
        _print([p.to_dict() for p in procs], args)
        return 0
    rows = []
    for p in procs:
        dur = (
            f"{(p.finished_at - p.started_at).total_seconds():.1f}s" if p.finished_at and p.started_at else ""
        )
        rows.append([p.id, p.table_id, p.action, p.instant.isoformat(timespec="seconds"), p.status, p.attempt, dur,
                     (p.failure_reason or "").splitlines()[0][:60] if p.failure_reason else ""])  # fmt: skip
    print(_table_rows(rows, ["ID", "TABLE", "ACTION", "INSTANT", "STATUS", "ATTEMPT", "DURATION", "REASON"]))
    return 0


def cmd_process(args: argparse.Namespace) -> int:
    _print(services.get_process(_store(args, create=False), args.id).to_dict(), args)
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    result = services.cancel_process(_store(args, create=False), args.id)
    print(f"process {args.id}: {result.status}")
    return 0 if result.accepted else 1


def cmd_clear(args: argparse.Namespace) -> int:
    results = services.clear_table(_store(args, create=False), args.table)
    for r in results:
        instant = r.instant.isoformat() if r.instant else ""
        print(f"process {r.process_id} ({r.action} at {instant}): {r.status}")
    print(f"{args.table}: {len(results)} process(es) canceled")
    return 0


def _log_without_airflow() -> None:
    """Progress lines (``tablemgmt: submitting ...``, Spark's output) on stderr when Airflow, which
    would have configured logging on import, has not been imported (a run with ``--store-url`` and a
    Spark connection from the environment needs no Airflow)."""
    import logging

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
    with _logs_to_stderr():
        stale = timedelta(seconds=args.stale_after) if args.stale_after else None
        store = _store(args)
        _log_without_airflow()
        result = run_now(
            store,
            args.table,
            args.action,
            instant,
            spark_conn_id=args.spark_conn_id,
            stale_after=stale,
        )
    _print(result.to_dict(), args)
    return 0


# -- dynamic tables -------------------------------------------------------------------------------
def _pairs(pairs: Sequence[str] | None, flag: str, example: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise services.InvalidInput(f"{flag}: {pair!r} must look like KEY=VALUE, e.g. {example}")
        out[key.strip()] = value
    return out


def _pauser(dag_id: str, paused: bool) -> None:
    """Airflow's pause flag through its metadata DB. If Airflow is not reachable from here the table's
    state still changes (its scheduled runs skip while SUSPENDED) and a warning says so."""
    try:
        with _logs_to_stderr():
            from airflow_tablemgmt.hooks.tablemgmt import set_dag_paused

            set_dag_paused(dag_id, paused)
    except Exception as e:  # noqa: BLE001 - the store's state is the source of truth; say what failed
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        print(
            f"warning: could not {'pause' if paused else 'unpause'} DAG {dag_id} in Airflow "
            f"({type(e).__name__}: {first}); run `airflow dags {'pause' if paused else 'unpause'} {dag_id}`",
            file=sys.stderr,
        )


def _dt_row(v: Any) -> list[Any]:
    last = v.last_refresh
    return [v.table.id, v.table.state, v.freshness, v.cron or "(after upstream)",
            str(v.table.managed_by), f"{last.id} {last.status}" if last else "",
            v.table.consecutive_failures]  # fmt: skip


def cmd_dt_create(args: argparse.Namespace) -> int:
    from airflow_tablemgmt.core.tables import Owner
    from airflow_tablemgmt.services import dynamic

    data: dict[str, Any] = services.load_spec_file(args.file) if args.file else {}
    if args.identifier:
        data["identifier"] = args.identifier
    for key, value in (
        ("query", args.query), ("freshness", args.freshness), ("time-zone", args.time_zone),
        ("owner", args.owner), ("queue", args.queue), ("priority", args.priority),
        ("retries", args.retries), ("retry-delay", args.retry_delay),
        ("suspend-after-failures", args.suspend_after_failures), ("refresh-mode", args.refresh_mode),
    ):  # fmt: skip
        if value is not None:
            data[key] = value
    if args.partitioned_by:
        data["partitioned-by"] = [c.strip() for v in args.partitioned_by for c in v.split(",") if c.strip()]
    for col, pattern in _pairs(args.date_formatter, "--date-formatter", "day=yyyy-MM-dd").items():
        data[f"partition.fields.{col}.date-formatter"] = pattern
    if not data:
        raise services.InvalidInput(
            "dt create: give IDENTIFIER with --query and --freshness, or --file SPEC.yaml"
        )
    store = _store(args)
    with _logs_to_stderr():
        dt, process = dynamic.create(store, data, None, Owner.STORE, spark_conn_id=args.spark_conn_id)
    if args.json:
        _print({"table": dt.to_dict(), "process": dynamic.history_row(process)}, args)
    else:
        summary = process.summary or {}
        print(f"{dt.id}: created ({dt.state}); first refresh: process {process.id} {process.status}, "
              f"{summary.get('rows_written', 0)} rows")  # fmt: skip
    return 0


def cmd_dt_list(args: argparse.Namespace) -> int:
    from airflow_tablemgmt.services import dynamic

    views = dynamic.list_(_store(args, create=False))
    if args.json:
        _print([v.to_dict() for v in views], args)
        return 0
    print(_table_rows([_dt_row(v) for v in views],
                      ["TABLE", "STATE", "FRESHNESS", "CRON", "MANAGED BY", "LAST REFRESH", "FAILURES"]))  # fmt: skip
    return 0


def cmd_dt_show(args: argparse.Namespace) -> int:
    from airflow_tablemgmt.services import dynamic

    _print(dynamic.get(_store(args, create=False), args.table).to_dict(), args)
    return 0


def cmd_dt_history(args: argparse.Namespace) -> int:
    from airflow_tablemgmt.services import dynamic

    rows = [
        dynamic.history_row(p) for p in dynamic.history(_store(args, create=False), args.table, args.limit)
    ]
    if args.json:
        _print(rows, args)
        return 0
    out = []
    for r in rows:
        parts = ",".join("/".join(f"{k}={v}" for k, v in p.items()) for p in r["partitions_written"])
        dur = f"{r['duration_seconds']:.1f}s" if isinstance(r["duration_seconds"], int | float) else ""
        out.append([r["process_id"], r["schedule_time"], r["trigger"] or "", r["state"],
                    r["refresh_action"] or "", r["rows_written"] if r["rows_written"] is not None else "",
                    parts[:40], dur, r["application_id"] or "",
                    (r["reason"] or "").splitlines()[0][:60] if r["reason"] else ""])  # fmt: skip
    print(_table_rows(out, ["ID", "SCHEDULE TIME", "TRIGGER", "STATE", "ACTION", "ROWS", "PARTITIONS",
                            "DURATION", "APPLICATION", "REASON"]))  # fmt: skip
    return 0


def cmd_dt_suspend(args: argparse.Namespace) -> int:
    from airflow_tablemgmt.services import dynamic

    dt = dynamic.suspend(_store(args, create=False), args.table, _pauser)
    print(f"{dt.id}: {dt.state}")
    return 0


def cmd_dt_resume(args: argparse.Namespace) -> int:
    from airflow_tablemgmt.services import dynamic

    options = _pairs(args.option, "--option", "spark.sql.shuffle.partitions=8") if args.option else None
    dt = dynamic.resume(_store(args, create=False), args.table, _pauser, options)
    print(f"{dt.id}: {dt.state}" + (f" (options: {dt.dynamic_options})" if dt.dynamic_options else ""))
    return 0


def cmd_dt_alter(args: argparse.Namespace) -> int:
    from airflow_tablemgmt.services import dynamic

    with _logs_to_stderr():
        result = dynamic.alter(
            _store(args, create=False), args.table, freshness=args.freshness, query=args.query,
            recreate=args.recreate, spark_conn_id=args.spark_conn_id,
        )  # fmt: skip
    print(f"{result.table.id}: altered {', '.join(result.changed)}"
          + (f"; recreated by process {result.process.id}" if result.process else ""))  # fmt: skip
    return 0


def cmd_dt_drop(args: argparse.Namespace) -> int:
    from airflow_tablemgmt.services import dynamic

    with _logs_to_stderr():
        dt = dynamic.drop(_store(args, create=False), args.table, purge=args.purge, pauser=_pauser,
                          spark_conn_id=args.spark_conn_id)  # fmt: skip
    print(
        f"{dt.id}: dropped"
        + (" (table purged)" if args.purge else " (the Iceberg table is kept; --purge drops it)")
    )
    return 0


def cmd_dt_refresh(args: argparse.Namespace) -> int:
    from airflow_tablemgmt.services import dynamic
    from airflow_tablemgmt.services.reap import reap_before_work

    with _logs_to_stderr():
        store = _store(args)
        reap_before_work(store)  # a CLI-only deployment has no operator start to reap for it
        process = dynamic.refresh_now(
            store, args.table, is_periodic=args.periodic, schedule_time=args.schedule_time,
            static_partitions=_pairs(args.partition, "--partition", "day=2026-02-01"),
            dynamic_options=_pairs(args.option, "--option", "spark.sql.shuffle.partitions=8"),
            spark_conn_id=args.spark_conn_id,
        )  # fmt: skip
    _print(dynamic.history_row(process), args)
    return 0


def _add_dt_parser(sub: Any) -> None:
    dt = sub.add_parser("dt", help="dynamic tables (FLIP-435): a table bound to a query and a freshness")
    dsub = dt.add_subparsers(dest="dt_command", required=True)

    cr = dsub.add_parser(
        "create", help="create a dynamic table now: Spark creates it and runs its first refresh"
    )
    cr.add_argument("identifier", nargs="?", help="catalog.namespace.table")
    cr.add_argument("--file", help="a YAML/JSON definition (as under dynamic-tables: in tables.yaml)")
    cr.add_argument("--query", help="one Spark SQL SELECT over tables of registered catalogs")
    cr.add_argument("--freshness", help="'5 MINUTE', '1 HOUR', '1 DAY' or 'downstream'")
    cr.add_argument("--refresh-mode", help="full (the only mode: Spark batch refreshes are full)")
    cr.add_argument(
        "--partitioned-by", action="append", metavar="COLUMN", help="a partition column (repeat, or a,b)"
    )
    cr.add_argument("--date-formatter", action="append", metavar="COLUMN=PATTERN",
                    help="partition.fields.COLUMN.date-formatter, e.g. day=yyyy-MM-dd")  # fmt: skip
    cr.add_argument("--time-zone", help="IANA zone the partition values are formatted in (default UTC)")
    cr.add_argument("--owner")
    cr.add_argument("--queue")
    cr.add_argument("--priority", type=int)
    cr.add_argument("--retries", type=int)
    cr.add_argument("--retry-delay")
    cr.add_argument("--suspend-after-failures", type=int)
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

    al = dsub.add_parser("alter", help="change the freshness (reschedules) or the query")
    al.add_argument("table")
    al.add_argument("--freshness")
    al.add_argument("--query")
    al.add_argument("--recreate", action="store_true",
                    help="when the new query's schema differs: drop and recreate the table from it")  # fmt: skip
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


# -- parser ---------------------------------------------------------------------------------------
def _positive_seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {value!r}")
    return seconds


def build_parser() -> argparse.ArgumentParser:
    # Here, not at the top: pydantic comes with it, and main() imports it with the collector off.
    from airflow_tablemgmt.core.actions import ACTIONS

    p = argparse.ArgumentParser(prog="tablemgmt", description="Lakehouse table maintenance on Airflow")
    p.add_argument(
        "--store-url", help="SQLAlchemy URL of the store (default: the tablemgmt_default connection)"
    )
    sub = p.add_subparsers(dest="command", required=True)

    db = sub.add_parser("db", help="metadata store")
    dbsub = db.add_subparsers(dest="db_command", required=True)
    dbsub.add_parser("upgrade", help="apply the store's migrations").set_defaults(func=cmd_db_upgrade)

    ap = sub.add_parser("apply", help="upsert a tables.yaml into the store (idempotent)")
    ap.add_argument("file")
    prune = ap.add_mutually_exclusive_group()
    prune.add_argument(
        "--no-prune", action="store_true", help="keep code-owned tables that the file no longer declares"
    )
    prune.add_argument(
        "--prune",
        action="store_true",
        help="prune even when the file declares no table (an explicit `tables: []` unregisters them all)",
    )
    ap.set_defaults(func=cmd_apply)

    rg = sub.add_parser("register", help="register (or update) a table owned by the store")
    rg.add_argument("table", nargs="?", help="catalog.namespace.table")
    rg.add_argument("--file", help="a YAML/JSON table spec instead of flags")
    rg.add_argument("--format")
    rg.add_argument("--owner")
    rg.add_argument("--queue")
    rg.add_argument("--priority", type=int)
    rg.add_argument("--action", action="append", help=f"enable an action ({', '.join(ACTIONS.names())})")
    rg.add_argument(
        "--set", action="append", metavar="ACTION.OPTION=VALUE", help="an action option or schedule override"
    )
    rg.add_argument(
        "--replace-actions",
        action="store_true",
        help="replace the table's whole action set with the --action/--set given (prints what it removes); "
        "without it an update keeps every action it does not name",
    )
    rg.add_argument(
        "--catalog-type",
        help="create the catalog if missing: hadoop | rest | hive | glue | jdbc (never changes an existing one)",
    )
    rg.add_argument("--warehouse", help="the new catalog's warehouse: an absolute path or URI")
    rg.set_defaults(func=cmd_register)

    ct = sub.add_parser("catalog", help="catalogs owned by the store")
    ctsub = ct.add_subparsers(dest="catalog_command", required=True)
    cs = ctsub.add_parser("set", help="create or change a catalog (every table in it follows)")
    cs.add_argument("name")
    cs.add_argument("--type", help="hadoop (default) | rest | hive | glue | jdbc")
    cs.add_argument("--warehouse", help="an absolute path or a URI such as s3://bucket/warehouse")
    cs.add_argument(
        "--property",
        action="append",
        metavar="KEY=VALUE",
        help="an Iceberg catalog property; secrets only as references (conn:/var:/env:)",
    )
    cs.set_defaults(func=cmd_catalog_set)
    from airflow_tablemgmt.cli.catalogs import add_catalog_remove

    add_catalog_remove(ctsub)

    cg = sub.add_parser("catalogs", help="list catalogs (secret property values masked)")
    add_output_option(cg)
    cg.set_defaults(func=cmd_catalogs)

    tb = sub.add_parser("tables", help="list registered tables")
    tb.add_argument("--all", action="store_true", help="include removed tables")
    add_output_option(tb)
    tb.set_defaults(func=cmd_tables)

    sh = sub.add_parser("show", help="a table's spec, actions and last processes")
    sh.add_argument("table")
    add_output_option(sh)
    sh.set_defaults(func=cmd_show)

    rm = sub.add_parser("remove", help="unregister a table owned by the store")
    rm.add_argument("table")
    rm.set_defaults(func=cmd_remove)

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
        type=_positive_seconds,
        metavar="SECONDS",
        help="treat a SUBMITTED/RUNNING process without a heartbeat for this long as orphaned (default: 90)",
    )
    add_output_option(rn)
    rn.set_defaults(func=cmd_run)
    _add_dt_parser(sub)
    from airflow_tablemgmt.cli import reap

    reap.add_parser(sub)
    from airflow_tablemgmt.cli import jars, schema

    jars.add_parser(sub)
    schema.add_parser(sub)
    return p


def _error(message: str) -> int:
    from airflow_tablemgmt.store.engine import hide_password

    print(f"error: {hide_password(message)}", file=sys.stderr)
    return 2


# Whether this process's command line turned the garbage collector off for its start-up.
_COLLECTOR = {"off_for_start_up": False}


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. ``argv`` None means this process's own command line (the ``tablemgmt``
    script): then the garbage collector stays off during the command's start-up
    (:func:`_start_up_done`) and the process ends as a short-lived one should (:func:`_end_of_process`).
    A caller that passes ``argv`` (a test, another program) keeps its collector as it is."""
    own_process = argv is None
    if own_process and gc.isenabled():
        gc.disable()
        _COLLECTOR["off_for_start_up"] = True
    try:
        return _main(argv)
    finally:
        if own_process:
            _end_of_process()


def _start_up_done() -> None:
    """The command's start-up is over (its store is open): freeze what the imports created out of the
    collector's reach and turn the collector back on for the work, which may be a long Spark job.

    The imports (SQLAlchemy, pydantic, Airflow when the store comes through its connection) allocate
    hundreds of thousands of objects that live as long as the process; with the collector on, the
    collections they trigger rescan them all again and again: measured, 30-45 ms of CPU before a
    maintenance run reaches spark-submit.
    """
    if _COLLECTOR["off_for_start_up"]:
        _COLLECTOR["off_for_start_up"] = False
        gc.freeze()
        gc.enable()


def _end_of_process() -> None:
    """Close the stores the command opened, then freeze the garbage collector's generations.

    Closing them here is what the interpreter's shutdown did anyway (a SQLite store's last connection
    folds its WAL back into the file). Freezing spares that shutdown a full collection over every
    object the command created: measured, 0.1-0.15 s of each command, a maintenance run included,
    for nothing, as the process is about to end.
    """
    engine = sys.modules.get("airflow_tablemgmt.store.engine")
    if engine is not None:
        engine.Store.clear_cache()
    _start_up_done()  # a command that never opened a store
    gc.freeze()


def _main(argv: Sequence[str] | None) -> int:
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
