"""The ``tablemgmt`` command line: one subparser group per module of this package."""

from __future__ import annotations

import argparse

from airflow_tablemgmt.cli import (
    catalogs,
    cost,
    dags,
    dynamic,
    enrolment,
    jars,
    policies,
    processes,
    reap,
    schema,
    tables,
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tablemgmt", description="Lakehouse table maintenance on Airflow")
    p.add_argument(
        "--store-url", help="SQLAlchemy URL of the store (default: the tablemgmt_default connection)"
    )
    sub = p.add_subparsers(dest="command", required=True)
    tables.add_parsers(sub)
    catalogs.add_parsers(sub)
    tables.add_listing_parsers(sub)
    processes.add_parsers(sub)
    cost.add_parser(sub)
    dynamic.add_parsers(sub)
    enrolment.add_parsers(sub)
    policies.add_parsers(sub)
    reap.add_parser(sub)
    jars.add_parser(sub)
    schema.add_parser(sub)
    dags.add_parser(sub)
    return p
