"""The operations users perform, one function each, shared by the CLI and the REST API.

Both fronts parse their input into these functions' typed arguments, call them, and render the returned
dataclasses; every failure is a :class:`~airflow_tablemgmt.core.errors.TableMgmtError` whose message
names the field, the bad value and what is allowed. Nothing here prints or exits.

The names below are imported from their modules on first use (PEP 562): a ``tablemgmt run`` needs the
process operations only, and the table, catalog and declaration ones would cost it start-up time.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_tablemgmt.services.catalogs import (
        CatalogResult,
        CatalogView,
        build_catalog,
        list_catalogs,
        set_catalog,
    )
    from airflow_tablemgmt.services.declarations import apply_file, check_declarations_path
    from airflow_tablemgmt.services.errors import (
        CatalogConflict,
        Conflict,
        DeclarationsRejected,
        InvalidInput,
        NotFound,
    )
    from airflow_tablemgmt.services.processes import (
        CancelResult,
        RunResult,
        cancel_process,
        clear_table,
        get_process,
        list_processes,
        parse_instant,
        parse_status,
        run_now,
    )
    from airflow_tablemgmt.services.tables import (
        RegisterRequest,
        RegisterResult,
        TableSummary,
        list_tables,
        load_spec_file,
        parse_sets,
        register_table,
        remove_table,
        show_table,
    )

# name -> the module that defines it
_EXPORTS = {
    **dict.fromkeys(
        ("CatalogResult", "CatalogView", "build_catalog", "list_catalogs", "set_catalog"), "catalogs"
    ),
    **dict.fromkeys(("apply_file", "check_declarations_path"), "declarations"),
    **dict.fromkeys(
        ("CatalogConflict", "Conflict", "DeclarationsRejected", "InvalidInput", "NotFound"), "errors"
    ),
    **dict.fromkeys(
        (
            "CancelResult",
            "RunResult",
            "cancel_process",
            "clear_table",
            "get_process",
            "list_processes",
            "parse_instant",
            "parse_status",
            "run_now",
        ),
        "processes",
    ),
    **dict.fromkeys(
        (
            "RegisterRequest",
            "RegisterResult",
            "TableSummary",
            "list_tables",
            "load_spec_file",
            "parse_sets",
            "register_table",
            "remove_table",
            "show_table",
        ),
        "tables",
    ),
}

__all__ = [
    "CancelResult",
    "CatalogConflict",
    "CatalogResult",
    "CatalogView",
    "Conflict",
    "DeclarationsRejected",
    "InvalidInput",
    "NotFound",
    "RegisterRequest",
    "RegisterResult",
    "RunResult",
    "TableSummary",
    "apply_file",
    "build_catalog",
    "cancel_process",
    "check_declarations_path",
    "clear_table",
    "get_process",
    "list_catalogs",
    "list_processes",
    "list_tables",
    "load_spec_file",
    "parse_instant",
    "parse_sets",
    "parse_status",
    "register_table",
    "remove_table",
    "run_now",
    "set_catalog",
    "show_table",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
