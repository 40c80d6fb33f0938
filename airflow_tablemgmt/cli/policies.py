"""Policies: ``policies list|show|apply|delete`` and ``explain <table>`` (``services.policies``)."""

from __future__ import annotations

import argparse
from typing import Any

from airflow_tablemgmt.cli.common import logs_to_stderr, open_store, pairs
from airflow_tablemgmt.cli.output import Output, add_output_option


def _match_text(view: dict[str, Any]) -> str:
    m = view["match"]
    parts = [f"{k}={','.join(m[k])}" for k in ("catalog", "namespace", "name") if m[k] != ["*"]]
    if m.get("format"):
        parts.append(f"format={','.join(m['format'])}")
    parts += [f"{k}={v}" for k, v in (m.get("properties") or {}).items()]
    return " ".join(parts) or "every table"


def cmd_policies_list(args: argparse.Namespace) -> int:
    from airflow_tablemgmt.services.policies import list_policies

    views = list_policies(open_store(args, create=False))
    out = Output(args)
    out.listing(
        views,
        [
            [v["name"], _match_text(v), ", ".join(v["actions"]) or "-", v["tables"], v["managed-by"]]
            for v in views
        ],
        ["POLICY", "MATCH", "ACTIONS", "TABLES", "MANAGED BY"],
    )
    if not views and not out.document:
        out.note("no policies: declare them under policies: in tables.yaml, or tablemgmt policies apply -f")
    return 0


def cmd_policies_show(args: argparse.Namespace) -> int:
    from airflow_tablemgmt.services.policies import show_policy

    Output(args).one(show_policy(open_store(args, create=False), args.name))
    return 0


def cmd_policies_apply(args: argparse.Namespace) -> int:
    from airflow_tablemgmt.services.policies import apply_policies, read_policy_file

    results = apply_policies(open_store(args), read_policy_file(args.file), args.file)
    for r in results:
        print(f"policy {r.name}: {r.outcome}")
    return 0


def cmd_policies_delete(args: argparse.Namespace) -> int:
    from airflow_tablemgmt.services.policies import delete_policy

    delete_policy(open_store(args, create=False), args.name)
    print(f"policy {args.name}: deleted (the tables it enrolled are retired by the next discovery pass)")
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    from airflow_tablemgmt.services.policies import explain

    properties = (
        pairs(args.property, "--property", "tablemgmt.maintenance=disabled") if args.property else None
    )
    with logs_to_stderr():  # reading the catalog may resolve references through Airflow
        e = explain(
            open_store(args, create=False),
            args.table,
            format=args.format,
            properties=properties,
            read_properties=not args.no_properties,
        )
    out = Output(args)
    if out.document:
        out.one(e.to_dict())
        return 0
    doc = e.to_dict()
    shown = [r for r in e.rows() if args.all or r["source"] != "default"]
    out.listing(
        None,
        [[r["action"], r["setting"], r["value"], r["source"]] for r in shown],
        ["ACTION", "SETTING", "VALUE", "SOURCE"],
    )
    owner = f"managed by {doc['managed-by']}" if doc["managed-by"] else "not registered"
    if doc["enrolled-by"]:
        owner += f", enrolled by policy {doc['enrolled-by']}"
    out.note(f"table {e.table} ({e.format}): {owner}")
    out.note(f"enabled: {', '.join(doc['enabled']) or 'none'}")
    for p in doc["policies"]:
        state = "applies" if p["applies"] else "matches but does not apply"
        out.note(f"policy {p['name']}: {state} (specificity {tuple(p['specificity'])})")
    if doc["opted-out"]:
        out.note(f"opted out: {doc['opted-out']}")
    for s in doc["skipped"]:
        out.note(f"skipped: policy {s['policy']}'s {s['action']}: {s['why']}")
    for note in doc["notes"]:
        out.note(note)
    if doc["error"]:
        out.note(f"error: {doc['error']} (shown: the table's own settings only)")
    if not args.all:
        out.note("settings at their defaults are left out; --all shows them")
    return 0


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "policies", help="maintenance policies: which tables get which actions (docs/policies.md)"
    )
    psub = p.add_subparsers(dest="policies_command", required=True)
    ls = psub.add_parser("list", help="every policy, what it matches and how many tables it manages")
    add_output_option(ls)
    ls.set_defaults(func=cmd_policies_list)
    sh = psub.add_parser("show", help="one policy as stored")
    sh.add_argument("name")
    add_output_option(sh)
    sh.set_defaults(func=cmd_policies_show)
    ap = psub.add_parser(
        "apply",
        help="create or update policies from a YAML file (one, a list, or policies: [...]); all or none",
    )
    ap.add_argument("-f", "--file", required=True, help="the YAML file")
    ap.set_defaults(func=cmd_policies_apply)
    rm = psub.add_parser(
        "delete", help="delete a policy applied through the CLI or REST (a file's: in the file)"
    )
    rm.add_argument("name")
    rm.set_defaults(func=cmd_policies_delete)

    ex = sub.add_parser("explain", help="a table's effective settings and where each comes from")
    ex.add_argument("table", help="catalog.namespace.table")
    ex.add_argument("--format", help="for a table not registered: its format (explained as discovery would)")
    ex.add_argument(
        "--property",
        action="append",
        metavar="KEY=VALUE",
        help="a table property to match with (instead of reading them)",
    )
    ex.add_argument(
        "--no-properties", action="store_true", help="do not read the table's properties from its catalog"
    )
    ex.add_argument("--all", action="store_true", help="also the settings at their defaults")
    add_output_option(ex)
    ex.set_defaults(func=cmd_explain)
