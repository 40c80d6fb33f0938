"""Declaring tables as code: ``dags/tables.yaml`` + ``dags/tables.d/*.yaml`` -> validated specs -> the store.

* ``files``: where declarations live, reading a file (never raises);
* ``parse``: one document -> validated catalogs, tables and dynamic tables, each entry on its own;
* ``checks``: what needs the whole set (declared once across files; dynamic tables' upstreams, cycles);
* ``registry``: the DAG file's load of every file, from each file's sync record when it is unchanged;
* ``sync``: the ONE upsert / record / prune path, for the DAG file and ``tablemgmt apply`` (the
  pruning rules are written down there);
* ``model``, ``errors``: what loading produces, one problem per bad entry.

The names below are resolved on first use, so importing the package loads no YAML or pydantic model.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "DeclarationError": "errors",
    "LoadedDeclarations": "model",
    "ParsedDocument": "model",
    "ReuseValidated": "model",
    "FileSet": "model",
    "TABLES_YAML_ENV": "files",
    "TABLES_D": "files",
    "default_tables_yaml": "files",
    "declaration_paths": "files",
    "load_declarations": "files",
    "read_declarations_text": "files",
    "begin_parse": "parse",
    "finish_parse": "parse",
    "entry_digest": "parse",
    "parse_declarations_text": "parse",
    "validation_fingerprint": "parse",
    "check_across_files": "checks",
    "check_dynamic_tables": "checks",
    "stored_dynamic_definitions": "checks",
    "with_stored_analysis": "checks",
    "ApplyReport": "sync",
    "PrunePolicy": "sync",
    "SyncReport": "sync",
    "apply_declarations": "sync",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
