"""The operations users perform, one function each, shared by the CLI and the REST API.

Both fronts parse their input into these functions' typed arguments, call them, and render the returned
dataclasses; every failure is a :class:`~airflow_tablemgmt.core.errors.TableMgmtError` whose message
names the field, the bad value and what is allowed. Nothing here prints or exits.
"""

from __future__ import annotations

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

__all__ = [
    "CancelResult",
    "CatalogConflict",
    "CatalogResult",
    "Conflict",
    "CatalogView",
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
