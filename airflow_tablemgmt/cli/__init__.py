"""The ``tablemgmt`` command: declare tables, inspect and steer processes.

Parsing and printing only: every command calls one function of :mod:`airflow_tablemgmt.services`, the
same the REST API calls, so both validate and answer identically. The modules: ``console`` (main and
its error handling), ``parser`` (the command line), ``common`` (the store, ``KEY=VALUE`` flags, the
collector's start-up handling), ``output`` (``--output table|json|yaml``), and one module per group of
commands: ``tables``, ``catalogs``, ``processes``, ``dynamic``, ``reap``, ``jars``, ``schema``.

``airflow_tablemgmt.cli:main`` is the console script's entry point.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_tablemgmt.cli.console import main

if TYPE_CHECKING:
    import argparse

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    from airflow_tablemgmt.cli.parser import build_parser as build

    return build()
