"""What the DAG file in the dags folder calls: read the registry once, build the DAGs.

The registry is ``dags/tables.yaml`` (owned by code) merged with tables registered through REST or
the CLI (owned by the store). YAML entries that differ from the store are upserted here, so the
store always reflects the file; unchanged entries cost no write.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from airflow_tablemgmt.core.errors import TableNotFound
from airflow_tablemgmt.core.tables import Owner, TableSpec
from airflow_tablemgmt.dag_factory import BuildResult, build_dags, cyclic_gc_paused, parse_dag_id
from airflow_tablemgmt.declarations import load_declarations

log = logging.getLogger(__name__)


def _sync_yaml(store: Any, loaded: Any, registered: dict[str, Any]) -> list[str]:
    errors: list[str] = []
    for catalog in loaded.catalogs:
        try:
            store.catalogs.upsert(catalog, Owner.CODE)
        except Exception as e:  # noqa: BLE001
            errors.append(f"catalog {catalog.name}: {e}")
    for spec in loaded.tables:
        row = registered.get(spec.id)
        if row is not None and row.spec == spec and row.managed_by == Owner.CODE:
            continue
        try:
            store.tables.upsert(spec, Owner.CODE)
        except Exception as e:  # noqa: BLE001
            errors.append(f"table {spec.id}: {e}")
    if not loaded.errors:
        store.tables.prune_code_tables({t.id for t in loaded.tables})
    return errors


def load_registry_and_build(
    tables_yaml: str | Path | None = None, *, only_dag_id: str | None = None, store: Any = None
) -> BuildResult:
    from airflow_tablemgmt.factories.discovery import default_factories

    loaded = load_declarations(tables_yaml)
    errors = [e.message for e in loaded.errors]
    if store is None:
        from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook

        store = TableMgmtHook().get_store()
    wanted = parse_dag_id(only_dag_id) if only_dag_id else None
    specs: dict[str, TableSpec] = {}
    if wanted is not None:
        # A task is starting: build its DAG only, from one row (or the file), no sync.
        declared = {t.id: t for t in loaded.tables}
        if wanted[0] in declared:
            specs[wanted[0]] = declared[wanted[0]]
        else:
            try:
                specs[wanted[0]] = store.tables.get(wanted[0])
            except TableNotFound:
                pass
    else:
        with cyclic_gc_paused():  # thousands of long-lived specs, no garbage
            registered = {r.spec.id: r for r in store.tables.list()}
        errors += _sync_yaml(store, loaded, registered)
        specs = {tid: r.spec for tid, r in registered.items()}
        for spec in loaded.tables:  # the file wins for the tables it declares
            specs[spec.id] = spec
    catalogs = {c.name: c for c in store.catalogs.list()}
    catalogs.update({c.name: c for c in loaded.catalogs})
    return build_dags(
        sorted(specs.values(), key=lambda s: s.id),
        default_factories(),
        only_dag_id=only_dag_id,
        declaration_errors=errors,
        catalogs=catalogs,
    )


def register_dags(namespace: dict[str, Any], tables_yaml: str | Path | None = None) -> BuildResult:
    """Put the DAGs into the caller's module namespace (``register_dags(globals())``)."""
    from airflow.sdk import get_parsing_context

    only = get_parsing_context().dag_id
    result = load_registry_and_build(tables_yaml, only_dag_id=only)
    for dag_id, dag in result.dags.items():
        namespace[dag_id] = dag
    return result
