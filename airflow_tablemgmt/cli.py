"""The `tablemgmt` command: declare tables, inspect and steer processes.

Every command that takes input validates it into the same ``TableSpec`` as YAML and REST, and exits
non-zero with a message naming the field, the value and what is allowed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from airflow_tablemgmt.core.actions import ACTIONS
from airflow_tablemgmt.core.errors import TableMgmtError
from airflow_tablemgmt.core.process import ACTIVE, ProcessStatus
from airflow_tablemgmt.core.tables import Owner, parse_catalog, parse_table


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


def _store(args: argparse.Namespace) -> Any:
    from airflow_tablemgmt.store import Store

    url = args.store_url
    if not url:
        with _logs_to_stderr():
            from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook

            url = TableMgmtHook().get_store_url()
    return Store.for_url(url)


def _print(data: Any, as_json: bool) -> None:
    if as_json:
        print(json.dumps(data, indent=2, default=str))
    else:
        print(yaml.safe_dump(data, sort_keys=False, default_flow_style=False).rstrip())


def _table_rows(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(fmt.format(*map(str, r)) for r in [header, *rows])


# -- commands -------------------------------------------------------------------------------------
def cmd_db_upgrade(args: argparse.Namespace) -> int:
    store = _store(args)
    store.upgrade()
    print(f"store at revision {store.current_revision()}")
    return 0


def cmd_apply(args: argparse.Namespace) -> int:
    from airflow_tablemgmt.declarations import apply_declarations, load_declarations

    path = Path(args.file)
    if not path.exists():
        print(f"error: {path}: no such file", file=sys.stderr)
        return 2
    loaded = load_declarations(path)
    if loaded.errors:
        for e in loaded.errors:
            print(f"error: {e.message}", file=sys.stderr)
        print(f"nothing applied: {len(loaded.errors)} error(s) in {path}", file=sys.stderr)
        return 2
    report = apply_declarations(_store(args), loaded, prune=not args.no_prune)
    print(f"applied {path}: {report}")
    return 0


def _parse_sets(pairs: Sequence[str]) -> dict[str, dict[str, Any]]:
    actions: dict[str, dict[str, Any]] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        action, dot, option = key.partition(".")
        if not sep or not dot:
            raise TableMgmtError(
                f"--set: {pair!r} must look like ACTION.OPTION=VALUE, e.g. expire-snapshots.retain-last=3"
            )
        actions.setdefault(action, {})[option] = yaml.safe_load(value)
    return actions


def cmd_register(args: argparse.Namespace) -> int:
    store = _store(args)
    if args.file:
        data = yaml.safe_load(Path(args.file).read_text()) or {}
    else:
        if not args.table:
            raise TableMgmtError("register: give TABLE (catalog.namespace.table) or --file SPEC.yaml")
        catalog, _, rest = args.table.partition(".")
        namespace, _, name = rest.partition(".")
        data = {"catalog": catalog, "namespace": namespace, "name": name}
        for key in ("format", "owner", "queue", "priority"):
            if getattr(args, key) is not None:
                data[key] = getattr(args, key)
        actions: dict[str, dict[str, Any]] = {a: {} for a in args.action or []}
        for action, opts in _parse_sets(args.set or []).items():
            actions.setdefault(action, {}).update(opts)
        data["actions"] = actions
    spec = parse_table(data, args.file or "register")  # validate everything before writing anything
    if args.warehouse or args.catalog_type:
        cat = parse_catalog(
            {"name": data.get("catalog"), "type": args.catalog_type or "hadoop", "warehouse": args.warehouse},
            "--catalog-type/--warehouse",
        )
        store.catalogs.upsert(cat, Owner.STORE)
    store.catalogs.get(spec.catalog)  # the catalog must exist
    outcome = store.tables.upsert(spec, Owner.STORE)
    print(f"{spec.id}: {outcome}")
    return 0


def cmd_tables(args: argparse.Namespace) -> int:
    rows = _store(args).tables.list(include_deleted=args.all)
    if args.json:
        _print(
            [
                {"table": r.spec.id, "managed_by": str(r.managed_by), "actions": r.spec.enabled_actions()}
                for r in rows
            ],
            True,
        )
        return 0
    print(_table_rows(
        [[r.spec.id, r.spec.format, str(r.managed_by), r.spec.owner, r.spec.queue, ",".join(r.spec.enabled_actions())] for r in rows],
        ["TABLE", "FORMAT", "MANAGED BY", "OWNER", "QUEUE", "ACTIONS"],
    ))  # fmt: skip
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    store = _store(args)
    reg = store.tables.get_registered(args.table)
    out: dict[str, Any] = {
        "table": reg.spec.id,
        "managed_by": str(reg.managed_by),
        "spec": reg.spec.model_dump(mode="json", by_alias=True),
        "actions": {},
    }
    for action in reg.spec.enabled_actions():
        last = store.processes.list(table_id=reg.spec.id, action=action, limit=1)
        out["actions"][action] = {
            "options": reg.spec.action_settings(action).options(),
            "last_process": last[0].to_dict() if last else None,
        }
    _print(out, args.json)
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    _store(args).tables.remove(args.table, Owner.STORE)
    print(f"{args.table}: removed")
    return 0


def cmd_processes(args: argparse.Namespace) -> int:
    status = ProcessStatus(args.status.upper()) if args.status else None
    procs = _store(args).processes.list(
        table_id=args.table, action=args.action, status=status, limit=args.limit
    )
    if args.json:
        _print([p.to_dict() for p in procs], True)
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
    _print(_store(args).processes.get(args.id).to_dict(), args.json)
    return 0


def _cancel(store: Any, pid: int) -> str:
    p = store.processes.get(pid)
    if p.status == ProcessStatus.PENDING:
        store.processes.transition(pid, ProcessStatus.CANCELED, expected=ProcessStatus.PENDING,
                                   failure_reason="canceled from the CLI")  # fmt: skip
        return "CANCELED"
    if p.status in (ProcessStatus.SUBMITTED, ProcessStatus.RUNNING):
        store.processes.transition(pid, ProcessStatus.CANCELING, expected=p.status,
                                   failure_reason="cancel requested from the CLI")  # fmt: skip
        return "CANCELING"
    return str(p.status)


def cmd_cancel(args: argparse.Namespace) -> int:
    store = _store(args)
    status = _cancel(store, args.id)
    print(f"process {args.id}: {status}")
    return 0 if status in ("CANCELED", "CANCELING") else 1


def cmd_clear(args: argparse.Namespace) -> int:
    store = _store(args)
    store.tables.get(args.table)
    procs = store.processes.list(table_id=args.table, status=list(ACTIVE), limit=10_000)
    for p in procs:
        print(f"process {p.id} ({p.action} at {p.instant.isoformat()}): {_cancel(store, p.id)}")
    print(f"{args.table}: {len(procs)} process(es) canceled")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    ACTIONS.get(args.action)
    instant = (
        datetime.fromisoformat(args.instant) if args.instant else datetime.now(UTC).replace(microsecond=0)
    )
    if instant.tzinfo is None:
        instant = instant.replace(tzinfo=UTC)
    with _logs_to_stderr():
        from airflow_tablemgmt.factories.discovery import default_factories
        from airflow_tablemgmt.hooks.spark_job import SparkJobHook
        from airflow_tablemgmt.lifecycle import ProcessRunner, RunRequest

        store = _store(args)
        kwargs = {"stale_after": timedelta(seconds=args.stale_after)} if args.stale_after else {}
        runner = ProcessRunner(store, default_factories(), SparkJobHook(args.spark_conn_id), **kwargs)
        outcome = runner.run(RunRequest(args.table, args.action, instant, holder="cli"))
    _print(
        {
            "process": outcome.process.id,
            "status": str(outcome.process.status),
            "attempt": outcome.process.attempt,
            "reused": outcome.reused,
            "summary": outcome.summary,
        },
        args.json,
    )
    return 0


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
    ap.add_argument(
        "--no-prune", action="store_true", help="keep code-owned tables that the file no longer declares"
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
    rg.add_argument("--catalog-type", help="register the catalog too: hadoop | rest | hive | glue | jdbc")
    rg.add_argument("--warehouse", help="the catalog's warehouse (hadoop)")
    rg.set_defaults(func=cmd_register)

    tb = sub.add_parser("tables", help="list registered tables")
    tb.add_argument("--all", action="store_true", help="include removed tables")
    tb.add_argument("--json", action="store_true")
    tb.set_defaults(func=cmd_tables)

    sh = sub.add_parser("show", help="a table's spec, actions and last processes")
    sh.add_argument("table")
    sh.add_argument("--json", action="store_true")
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
    ps.add_argument("--json", action="store_true")
    ps.set_defaults(func=cmd_processes)

    pr = sub.add_parser("process", help="one process in full")
    pr.add_argument("id", type=int)
    pr.add_argument("--json", action="store_true")
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
    rn.add_argument("--json", action="store_true")
    rn.set_defaults(func=cmd_run)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except TableMgmtError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
