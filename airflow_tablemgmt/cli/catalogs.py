"""Catalogs: ``catalog set``, ``catalog remove``, ``catalogs`` (``services.catalogs``)."""

from __future__ import annotations

import argparse
from typing import Any

from airflow_tablemgmt import services
from airflow_tablemgmt.cli.common import open_store, pairs
from airflow_tablemgmt.cli.output import Output, add_output_option


def cmd_catalog_set(args: argparse.Namespace) -> int:
    spec = services.build_catalog(
        args.name,
        type=args.type,
        warehouse=args.warehouse,
        properties=pairs(args.property, "--property", "uri=https://host"),
        source="catalog set",
    )
    result = services.set_catalog(open_store(args), spec)
    print(f"catalog {result.name}: {result.outcome}")
    return 0


def cmd_catalog_remove(args: argparse.Namespace) -> int:
    from airflow_tablemgmt.services.catalogs import remove_catalog

    remove_catalog(open_store(args, create=False), args.name)
    print(f"catalog {args.name}: removed")
    return 0


def cmd_catalogs(args: argparse.Namespace) -> int:
    """The catalogs; a stored row that no longer validates (a plaintext secret written before secrets
    had to be references) is listed masked, and for a person its problem is a line under the table —
    what to migrate — as the document's ``problem`` is for a script."""
    views = services.list_catalogs(open_store(args, create=False))
    out = Output(args)
    out.listing(
        [v.to_dict() for v in views],
        [
            [v.name, v.type, v.warehouse or "", ", ".join(f"{k}={x}" for k, x in v.properties.items())]
            for v in views
        ],
        ["CATALOG", "TYPE", "WAREHOUSE", "PROPERTIES"],
    )
    if not out.document:
        for v in views:
            if v.problem is not None:
                out.note(f"catalog {v.name}: {v.problem}")
    return 0


def add_parsers(sub: Any) -> None:
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

    rm = ctsub.add_parser("remove", help="remove a catalog no table uses (refused, naming them, otherwise)")
    rm.add_argument("name")
    rm.set_defaults(func=cmd_catalog_remove)

    cg = sub.add_parser("catalogs", help="list catalogs (secret property values masked)")
    add_output_option(cg)
    cg.set_defaults(func=cmd_catalogs)
