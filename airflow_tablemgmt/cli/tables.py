"""Tables: ``db upgrade``, ``apply``, ``register``, ``tables``, ``show``, ``remove``.

Parsing and printing only: each command calls one function of :mod:`airflow_tablemgmt.services`, the
same the REST API calls."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt import services
from airflow_tablemgmt.cli.common import logs_to_stderr, open_store
from airflow_tablemgmt.cli.output import Output, add_output_option

if TYPE_CHECKING:
    from airflow_tablemgmt.store import Store


def cmd_db_upgrade(args: argparse.Namespace) -> int:
    store = open_store(args)
    store.upgrade()
    print(f"store at revision {store.current_revision()}")
    return 0


def cmd_apply(args: argparse.Namespace) -> int:
    path = services.check_declarations_path(args.file)  # before the store is opened (or created)
    report = services.apply_file(
        open_store(args), path, prune=not args.no_prune, allow_empty_prune=bool(args.prune)
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
    result = services.register_table(open_store(args), req)
    if result.catalog_created:
        print(f"catalog {result.table_id.split('.')[0]}: created")
    print(f"{result.table_id}: {result.outcome}")
    if result.removed_actions:
        print(f"{result.table_id}: removed actions: {', '.join(result.removed_actions)}")
    for warning in result.warnings:  # e.g. a location not readable from here: registered all the same
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def _no_tables_note(args: argparse.Namespace, store: Store) -> str:
    """Which store was opened and how it was chosen: an empty list is often the wrong store (a new
    shell without the AIRFLOW_HOME or TABLEMGMT_STORE_URL that the tables were registered under)."""
    if args.store_url:
        source = "--store-url"
    else:
        with logs_to_stderr():
            from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook

            source = TableMgmtHook().locate_store().source
    return (
        f"no tables in the store at {store.display_url} (from {source}); to use another store, set "
        "TABLEMGMT_STORE_URL or the tablemgmt_default connection (or AIRFLOW_HOME, whose "
        "tablemgmt.db is the default), or pass --store-url"
    )


def cmd_tables(args: argparse.Namespace) -> int:
    out = Output(args)
    store = open_store(args, create=False)
    rows = services.list_tables(store, include_removed=args.all)
    if not rows:
        out.note(_no_tables_note(args, store))
        if not out.document:
            return 0
    out.listing(
        [
            {
                "table": r.table,
                "managed_by": r.managed_by,
                **({"policy": r.policy} if r.policy else {}),
                "actions": r.actions,
            }
            for r in rows
        ],
        [[r.table, r.format, r.managed, r.owner, r.queue, ",".join(r.actions)] for r in rows],
        ["TABLE", "FORMAT", "MANAGED BY", "OWNER", "QUEUE", "ACTIONS"],
    )
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from airflow_tablemgmt.services.health import table_health

    store = open_store(args, create=False)
    shown = services.show_table(store, args.table)
    out = Output(args)
    h = table_health(store, shown["table"])  # the REST API's and the metrics' score (metadata/health.py)
    score = h.score
    health: dict[str, Any] = score.to_dict() if score is not None else {"score": None, "error": h.error}
    if h.format_health is not None:  # measured by the format's own health hook: its figures too
        health.update(format=h.format_health.format, figures=h.format_health.figures)
    elif h.files is not None and h.files.delete_files:  # v2 delete files and v3 deletion vectors apart
        health["deletes"] = h.files.delete_figures()
    if not out.document:  # a person reads the verdict first; the document has it under health:
        if score is None:
            print(f"# health unavailable: {h.error}")
        else:
            verdict = "an action would help" if score.needs_attention else "no action would help now"
            print(f"# health {score.score}/100: {verdict}")
            for f in score.findings:
                print(f"#   -{f.points} {f.action}: {f.reason}")
            if h.files is not None and h.files.delete_files:
                d = h.files
                print(
                    f"# deletes: {d.deletes_in_words} mark {d.deleted_rows} of {d.records} rows deleted"
                    + (f" ({d.dv_deleted_rows} by deletion vectors)" if d.deletion_vectors else "")
                )
    out.one({"table": shown["table"], "health": health, **{k: v for k, v in shown.items() if k != "table"}})
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    services.remove_table(open_store(args, create=False), args.table)
    print(f"{args.table}: removed")
    return 0


def add_parsers(sub: Any) -> None:
    # Here, not at the top: pydantic comes with it, and main() imports it with the collector off.
    from airflow_tablemgmt.core.actions import ACTIONS

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


def add_listing_parsers(sub: Any) -> None:
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
