"""``tablemgmt catalog remove NAME``: remove a store-owned catalog no table uses (``services.catalogs``)."""

from __future__ import annotations

import argparse
from typing import Any


def cmd_catalog_remove(args: argparse.Namespace) -> int:
    from airflow_tablemgmt.cli import _store
    from airflow_tablemgmt.services.catalogs import remove_catalog

    remove_catalog(_store(args, create=False), args.name)
    print(f"catalog {args.name}: removed")
    return 0


def add_catalog_remove(subparsers: Any) -> None:
    """The ``remove`` subcommand under ``tablemgmt catalog``."""
    rm = subparsers.add_parser(
        "remove", help="remove a catalog no table uses (refused, naming them, otherwise)"
    )
    rm.add_argument("name")
    rm.set_defaults(func=cmd_catalog_remove)
