"""What the DAG file in the dags folder calls: read the registry once, build the DAGs.

The registry is ``dags/tables.yaml`` (owned by code) merged with tables registered through REST or
the CLI (owned by the store). YAML entries that differ from the store are upserted here, so the
store always reflects the file; unchanged entries cost no write. Code-owned tables the file no
longer lists are removed only when the file is clean and lists at least one table; an explicit
``tables: []`` is logged (WARNING, with the tables it would remove) and changes nothing.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from airflow_tablemgmt.core.errors import TableNotFound, UnreadableTable
from airflow_tablemgmt.core.tables import Owner, TableSpec
from airflow_tablemgmt.dag_factory import BuildResult, build_dags, cyclic_gc_paused, parse_dag_id
from airflow_tablemgmt.declarations import LoadedDeclarations, load_declarations

log = logging.getLogger(__name__)


def _sync_yaml(
    store: Any, loaded: LoadedDeclarations, registered: dict[str, Any]
) -> tuple[list[str], list[str], set[str]]:
    """Upsert the file's catalogs and changed tables; prune per :meth:`LoadedDeclarations.may_prune`.

    Returns ``(errors, pruned table ids, ids of declared tables left out)``. A table whose catalog
    the store refused (e.g. a second catalog over another's warehouse) is left out: building it
    would give one physical table a second name. Any error here also stops pruning. An explicit
    ``tables: []`` never prunes here (only ``tablemgmt apply --prune`` does): it is logged with the
    tables it would remove.
    """
    errors: list[str] = []
    refused: set[str] = set()
    for catalog in loaded.catalogs:
        try:
            store.catalogs.upsert(catalog, Owner.CODE)
        except Exception as e:  # noqa: BLE001
            refused.add(catalog.name)
            errors.append(
                str(e) if str(e).startswith(f"catalog {catalog.name}") else f"catalog {catalog.name}: {e}"
            )
    left_out: set[str] = set()
    for spec in loaded.tables:
        if spec.catalog in refused:
            left_out.add(spec.id)
            errors.append(
                f"table {spec.id}: not registered, its catalog {spec.catalog} was refused (see above)"
            )
            continue
        row = registered.get(spec.id)
        if row is not None and row.spec == spec and row.managed_by == Owner.CODE:
            continue
        try:
            store.tables.upsert(spec, Owner.CODE)
        except Exception as e:  # noqa: BLE001
            left_out.add(spec.id)
            errors.append(f"table {spec.id}: {e}")
    if loaded.may_prune() and not errors:
        return errors, store.tables.prune_code_tables({t.id for t in loaded.tables}), left_out
    if loaded.declares_tables and not loaded.errors:  # an explicit, empty `tables: []`
        kept = sorted(tid for tid, r in registered.items() if r.managed_by == Owner.CODE)
        if kept:
            log.warning(
                "%s declares tables: [] — the DAG file does not remove the %d code-owned table(s) it "
                "would prune, and keeps their DAGs: %s; run `tablemgmt apply --prune %s` to remove them",
                loaded.source,
                len(kept),
                ", ".join(kept),
                loaded.source,
            )
    return errors, [], left_out


def load_registry_and_build(
    tables_yaml: str | Path | None = None, *, only_dag_id: str | None = None, store: Any = None
) -> BuildResult:
    """Every DAG of the registry (or only ``only_dag_id``). Never fails as a whole: an unreadable
    tables.yaml, a bad entry or a stored row that no longer validates becomes a declaration error
    (an import error of the DAG file in Airflow) naming it, and every other table's DAGs build."""
    from airflow_tablemgmt.factories.discovery import default_factories

    loaded = load_declarations(tables_yaml)
    errors = [e.message for e in loaded.errors]
    if store is None:
        from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook

        store = TableMgmtHook().get_store()
    wanted = parse_dag_id(only_dag_id) if only_dag_id else None
    specs: dict[str, TableSpec] = {}
    declared = {t.id: t for t in loaded.tables}
    if wanted is not None:
        # A task is starting: build its DAG only, from one row (or the file), no sync.
        if wanted[0] in declared:
            specs[wanted[0]] = declared[wanted[0]]
        else:
            try:
                specs[wanted[0]] = store.tables.get(wanted[0])
            except TableNotFound:
                pass
            except UnreadableTable as e:
                errors.append(str(e))
    else:
        with cyclic_gc_paused():  # thousands of long-lived specs, no garbage
            rows, unreadable = store.tables.list_with_errors()
            registered = {r.spec.id: r for r in rows}
        # A row the file declares is rewritten from the file just below; report only the others.
        errors += [u.message for u in unreadable if u.table_id not in declared]
        sync_errors, pruned, left_out = _sync_yaml(store, loaded, registered)
        errors += sync_errors
        specs = {tid: r.spec for tid, r in registered.items() if tid not in pruned}
        # The file wins for the tables it declares (those the store refused keep their stored row).
        specs.update({tid: spec for tid, spec in declared.items() if tid not in left_out})
    stored_catalogs, unreadable_catalogs = store.catalogs.list_with_errors()
    catalogs = {c.name: c for c in stored_catalogs}
    catalogs.update({c.name: c for c in loaded.catalogs})
    errors += [u.message for u in unreadable_catalogs if u.name not in catalogs]
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
