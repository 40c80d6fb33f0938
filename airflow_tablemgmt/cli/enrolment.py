"""Discovery: ``discover`` (one pass, ``services.enrolment.discover``) and ``enrolments`` (what passes changed)."""

from __future__ import annotations

import argparse
from typing import Any

from airflow_tablemgmt.cli.common import logs_to_stderr, open_store
from airflow_tablemgmt.cli.output import Output, add_output_option


def cmd_discover(args: argparse.Namespace) -> int:
    from airflow_tablemgmt.services.enrolment import discover

    store = open_store(args)
    with logs_to_stderr():  # resolving a catalog's references may import Airflow
        result = discover(store, policy=args.policy, dry_run=args.dry_run)
    out = Output(args)
    if out.document:
        out.one(result.to_dict())
        return 0
    would = "would be " if result.dry_run else ""
    out.listing(
        None,
        [[c.table, c.policy, f"{would}{c.change}", c.reason] for c in result.changes],
        ["TABLE", "POLICY", "CHANGE", "WHY"],
    )
    for c in result.catalogs:
        state = "listed" if c.complete else "listed INCOMPLETELY (nothing retired from it)"
        out.note(f"catalog {c.catalog}: {c.tables} table(s) {state}")
        for line in [*c.failures, *c.unreadable]:
            out.note(f"  {line}")
    for table, why in result.skipped:
        out.note(f"left alone: {table}: {why}")
    for note in result.notes:
        out.note(note)
    if not result.policies:
        out.note(
            "no policies: declare one under policies: in tables.yaml, or tablemgmt policies apply -f FILE"
        )
    counts = ", ".join(f"{result.count(k)} {k}" for k in ("enrolled", "re-enrolled", "updated", "retired"))
    out.note(f"{'dry run: ' if result.dry_run else ''}{counts}")
    return 0


def cmd_enrolments(args: argparse.Namespace) -> int:
    from airflow_tablemgmt.services.enrolment import enrolment_records

    records = enrolment_records(
        open_store(args, create=False),
        policy=args.policy,
        table=args.table,
        change=args.change,
        limit=args.limit,
    )
    Output(args).listing(
        [r.to_dict() for r in records],
        [[r.at.isoformat(timespec="seconds"), r.policy, r.table_id, r.change, r.reason] for r in records],
        ["AT", "POLICY", "TABLE", "CHANGE", "WHY"],
    )
    return 0


def add_parsers(sub: Any) -> None:
    d = sub.add_parser(
        "discover",
        help="list the policies' catalogs (no JVM): enrol new tables, retire dropped ones, record each change",
    )
    d.add_argument("--policy", help="one policy's catalogs and tables only (default: every policy)")
    d.add_argument("--dry-run", action="store_true", help="report the changes without making them")
    add_output_option(d)
    d.set_defaults(func=cmd_discover)

    e = sub.add_parser("enrolments", help="what discovery changed, newest first: enrolled, retired, ...")
    e.add_argument("--policy", help="one policy's records")
    e.add_argument("--table", help="one table's records (catalog.namespace.table)")
    e.add_argument("--change", help="enrolled | re-enrolled | updated | retired")
    e.add_argument("--limit", type=int, default=100, help="at most this many (1-1000; default 100)")
    add_output_option(e)
    e.set_defaults(func=cmd_enrolments)
