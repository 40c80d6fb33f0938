"""What the DAG file in the dags folder calls: read the registry once, build the DAGs.

The registry is the declarations files — ``dags/tables.yaml`` and ``dags/tables.d/*.yaml`` (owned
by code) — merged with tables registered through REST or the CLI (owned by the store). The files
are loaded by :mod:`airflow_tablemgmt.declarations.registry` (an unchanged file from its sync
record, without reading its YAML) and written by :func:`airflow_tablemgmt.declarations.sync.sync`
with :data:`~airflow_tablemgmt.declarations.sync.PrunePolicy.PARSE` (the pruning rules are written
down there): entries that differ from the store are upserted, each clean sync is recorded per file,
and an explicit ``tables: []`` is logged and prunes nothing. A task start builds its one DAG from
one table row when every file is in sync.

A declared table's DAGs are built from its declaration with the stored policies merged in
(:mod:`airflow_tablemgmt.store.effective`), on both paths. The policies matching a table are part of its
DAG cache key, so a policy's change rebuilds the tables it matches. A table a policy enrolled has no DAGs of
its own: its policy's planned (policy, action) DAGs run it (:mod:`airflow_tablemgmt.dag_factory.plan`, ADR
0004), so the DAG count grows with policies × actions, not with enrolled tables.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.naming import discovery_policy_of, plan_of
from airflow_tablemgmt.dag_factory.result import BuildResult

if TYPE_CHECKING:
    from airflow_tablemgmt.core.tables import TableSpec
    from airflow_tablemgmt.declarations.model import LoadedDeclarations
    from airflow_tablemgmt.factories.discovery import FactoryRegistry
    from airflow_tablemgmt.store import Store


def load_registry_and_build(
    tables_yaml: str | Path | None = None, *, only_dag_id: str | None = None, store: Store | None = None
) -> BuildResult:
    """Every DAG of the registry (or only ``only_dag_id``). Never fails as a whole: an unreadable
    declarations file, a bad entry or a stored row that no longer validates becomes a declaration
    error (an import error of the DAG file in Airflow) naming it, and every other table's DAGs build.

    The registry is ``tables.yaml`` plus ``tables.d/*.yaml`` beside it, and the store. A file
    unchanged since its last sync is not read as YAML (its tables are the store's rows); a task
    start reads one table row when every file is in sync.

    Each path imports only what it builds with (a task start pays for every import): a planned or discovery
    DAG's task start imports neither the declarations nor the tables' DAG builder.
    """
    if store is None:
        from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook

        store = TableMgmtHook().get_store()
    if only_dag_id is not None and discovery_policy_of(only_dag_id) is not None:  # a policy's discovery DAG
        from airflow_tablemgmt.dag_factory.discovery import build_discovery_dags, stored_policies

        return BuildResult(dags=build_discovery_dags(stored_policies(store), only_dag_id))
    if (
        only_dag_id is not None and plan_of(only_dag_id) is not None
    ):  # a policy's planned (policy, action) DAG
        from airflow_tablemgmt.dag_factory.discovery import stored_policies
        from airflow_tablemgmt.dag_factory.plan import build_plan_dags

        return BuildResult(dags=build_plan_dags(stored_policies(store), only_dag_id))
    return _build_tables(tables_yaml, only_dag_id, store)


def _build_tables(tables_yaml: str | Path | None, only_dag_id: str | None, store: Store) -> BuildResult:
    """The declared tables' DAGs (only ``only_dag_id``'s when given), and on a full parse the policies'
    planned and discovery DAGs (see :func:`load_registry_and_build`)."""
    from airflow_tablemgmt.core.naming import parse_dag_id
    from airflow_tablemgmt.core.tables import Owner
    from airflow_tablemgmt.dag_factory.build import build_dags, cyclic_gc_paused
    from airflow_tablemgmt.declarations.registry import one_table
    from airflow_tablemgmt.factories.discovery import default_factories
    from airflow_tablemgmt.store.effective import PolicyMerge

    wanted = parse_dag_id(only_dag_id) if only_dag_id else None
    stored_catalogs, unreadable_catalogs = store.catalogs.list_with_errors()
    catalogs = {c.name: c for c in stored_catalogs}
    specs: dict[str, TableSpec] = {}
    errors: list[str] = []
    merge = PolicyMerge.load(store)
    enrolled: set[str] = set()  # tables a policy enrolled: their rows already hold the policies' settings
    enrolled_rows: list[Any] = []  # their rows (the full parse): the policies' assets watch them
    if wanted is not None:
        errors, spec = one_table(tables_yaml, store, wanted[0], catalogs)
        if spec is not None and not _enrolled_row(store, spec):  # an enrolled table has no DAG of its own
            specs[spec.id] = spec
        files: list[LoadedDeclarations] = []
    else:
        # A full parse's own modules (a task start reads one row and writes nothing: not imported then).
        from airflow_tablemgmt.declarations.registry import load_files
        from airflow_tablemgmt.declarations.sync import PrunePolicy, sync

        with cyclic_gc_paused():  # thousands of long-lived specs, no garbage
            rows, unreadable = store.tables.list_with_errors()
            registered = {r.spec.id: r for r in rows}
            fs = load_files(tables_yaml, store, registered, catalogs)
        declared = fs.declared
        errors = fs.errors
        # A row the file declares is rewritten from the file just below; report only the others.
        errors += [u.message for u in unreadable if u.table_id not in declared]
        report = sync(store, fs, prune=PrunePolicy.PARSE, registered=registered, record=True)
        errors += report.errors
        pruned = set(report.removed)
        specs = {tid: r.spec for tid, r in registered.items() if tid not in pruned}
        # The files win for the tables they declare (those the store refused keep their stored row).
        specs.update({tid: spec for tid, spec in declared.items() if tid not in report.left_out})
        enrolled = {
            tid
            for tid, r in registered.items()
            if r.managed_by == Owner.POLICY and tid in specs and specs[tid] is r.spec
        }
        enrolled_rows = [registered[tid] for tid in sorted(enrolled)]
        # Its policy's planned DAGs run an enrolled table (dag_factory/plan.py): no DAGs of its own.
        specs = {tid: spec for tid, spec in specs.items() if tid not in enrolled}
        files = fs.files
    for f in files:
        catalogs.update({c.name: c for c in f.catalogs})
    errors += [u.message for u in unreadable_catalogs if u.name not in catalogs]
    if wanted is None and only_dag_id is None:
        from airflow_tablemgmt.dag_factory.cache import build_with_cache
        from airflow_tablemgmt.dag_factory.discovery import build_discovery_dags, stored_policies
        from airflow_tablemgmt.dag_factory.plan import build_plan_dags, policy_watched

        # Unchanged tables' DAGs come from the per-host cache of built DAGs; the others are built.
        result = build_with_cache(
            sorted(specs.values(), key=lambda s: s.id),
            default_factories(),
            declaration_errors=errors,
            catalogs=catalogs,
            tables_yaml=tables_yaml,
            merge=merge if merge else None,
            enrolled=enrolled,
        )
        policies = stored_policies(store)
        result.dags.update(build_discovery_dags(policies))  # one per policy, on its interval
        # One per (policy, action); an event-driven one on its policy's asset, watching the rows read above.
        watched = policy_watched(enrolled_rows, catalogs, default_factories())
        result.dags.update(build_plan_dags(policies, watched=watched))
        return result
    if merge:
        merged, merge_errors = merge.apply_all(specs.values(), enrolled)
        specs = {s.id: s for s in merged}
        errors += merge_errors.values()
    return build_dags(
        sorted(specs.values(), key=lambda s: s.id),
        default_factories() if wanted is None else _task_start_factories(specs.values()),
        only_dag_id=only_dag_id,
        declaration_errors=errors,
        catalogs=catalogs,
    )


def _task_start_factories(specs: Iterable[TableSpec]) -> FactoryRegistry:
    """The factories a table's task start builds its DAG with: its format's own factory and the dynamic
    tables' when its format is one of this package's and has every action of the table (what
    :func:`default_factories` would choose for each: a format's factory answers for its own format only, and
    this package's come first), without loading the other formats or scanning every installed distribution
    for format plugins; else every installed one."""
    from airflow_tablemgmt.core.formats import FORMATS
    from airflow_tablemgmt.factories.discovery import FactoryRegistry, default_factories
    from airflow_tablemgmt.factories.dynamic import DynamicTableProcessFactory

    specs = list(specs)
    registry = FactoryRegistry()
    for name in dict.fromkeys(str(spec.format) for spec in specs):
        fmt = FORMATS.builtin_format(name)
        if fmt is None:
            return default_factories()
        registry.add_format(fmt)
    registry.add(DynamicTableProcessFactory())
    registry.errors.update(FORMATS.errors)
    for spec in specs:
        format_name = str(spec.format)
        supported = {
            a for f in registry.factories.values() for a in f.supported_actions().get(format_name, set())
        }
        if not set(spec.actions) <= supported:
            return default_factories()
    return registry


def _enrolled_row(store: Store, spec: TableSpec) -> bool:
    """Whether ``spec`` is the row of a table a policy enrolled (not a file's newer declaration of it)."""
    from airflow_tablemgmt.core.tables import Owner

    try:
        row = store.tables.get_registered(spec.id)
    except Exception:  # noqa: BLE001 - no row (a file's table not synced yet): a declaration
        return False
    return row.managed_by == Owner.POLICY and row.spec == spec


def register_dags(namespace: dict[str, Any], tables_yaml: str | Path | None = None) -> BuildResult:
    """Put the DAGs into the caller's module namespace (``register_dags(globals())``)."""
    from airflow.sdk import get_parsing_context

    only = get_parsing_context().dag_id
    result = load_registry_and_build(tables_yaml, only_dag_id=only)
    for dag_id, dag in result.dags.items():
        namespace[dag_id] = dag
    return result
