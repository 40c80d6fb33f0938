"""Apply a declarations file (tables.yaml) to the store, with the pruning rules made explicit."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from airflow_tablemgmt.services.errors import DeclarationsRejected, InvalidInput

if TYPE_CHECKING:
    from airflow_tablemgmt.declarations.sync import ApplyReport
    from airflow_tablemgmt.store import Store


def check_declarations_path(path: str | Path) -> Path:
    """``path`` if it is an existing regular file, else :class:`InvalidInput` saying what it is."""
    p = Path(path)
    if not p.exists():
        raise InvalidInput(f"{p}: no such file")
    if not p.is_file():
        raise InvalidInput(f"{p} is not a file; give the path of a tables.yaml")
    return p


def apply_file(
    store: Store, path: str | Path, *, prune: bool = True, allow_empty_prune: bool = False
) -> ApplyReport:
    """Upsert the file's catalogs and tables (owned by code).

    ``prune`` soft-deletes code-owned tables the file no longer declares, by the pruning rules of
    :mod:`airflow_tablemgmt.declarations.sync` (an explicit ``tables: []`` prunes only with
    ``allow_empty_prune``, `apply --prune`). A file with any error applies nothing
    (:class:`DeclarationsRejected`).
    """
    from airflow_tablemgmt.declarations.files import load_declarations
    from airflow_tablemgmt.declarations.sync import apply_declarations

    p = check_declarations_path(path)
    try:
        loaded = load_declarations(p)
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidInput(f"{p}: cannot read: {e}") from None
    if loaded.errors:
        raise DeclarationsRejected(str(p), [e.message for e in loaded.errors])
    return apply_declarations(store, loaded, prune=prune, allow_empty_prune=allow_empty_prune)
