"""Changing a dynamic table: declare (validate and store it CREATING), suspend, resume, alter
(freshness, query; a new query is analysed by Spark, ``recreate`` replaces the table), drop.

A ``runner`` (a :class:`~airflow_tablemgmt.lifecycle.Submitter`, e.g. ``SparkJobHook``) runs a Spark
job here and now: the analysis of an altered query, its recreation, a purge.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.dynamic.refresh import MANUAL, REFRESH, refresh_parameters
from airflow_tablemgmt.core.errors import JobFailed
from airflow_tablemgmt.core.process import Process
from airflow_tablemgmt.core.tables import Owner
from airflow_tablemgmt.services.dynamic.refresh import run_refresh_here
from airflow_tablemgmt.services.dynamic.views import (
    AlterResult,
    DagPauser,
    check_options,
    check_store_owned,
    check_upstreams,
    load_table,
    parse_definition,
)
from airflow_tablemgmt.services.errors import Conflict, InvalidInput
from airflow_tablemgmt.services.run_now import dag_id_for

if TYPE_CHECKING:
    from airflow_tablemgmt.core.dynamic import DynamicTableSpec
    from airflow_tablemgmt.lifecycle import Submitter
    from airflow_tablemgmt.store import Store
    from airflow_tablemgmt.store.dynamic import DynamicTable


def declare(store: Store, definition_dict: Mapping[str, Any], owner: Owner = Owner.STORE) -> DynamicTable:
    """Validate the definition (fields, catalog, no clash, upstreams) and store it CREATING. No Spark."""
    from airflow_tablemgmt.store.dynamic import CREATING

    definition = parse_definition(definition_dict)
    store.catalogs.get(definition.catalog)  # CatalogNotFound names the registered ones
    existing = store.dynamic.find(definition.id)
    if existing is not None:
        raise Conflict(f"dynamic table {definition.id} already exists ({existing.state}); alter or drop it")
    if definition.id in {t.spec.id for t in store.tables.list()}:
        raise Conflict(f"table {definition.id} is registered as a plain table; remove it first")
    check_upstreams(store, definition)
    store.dynamic.upsert(definition, owner, state=CREATING)
    return store.dynamic.get(definition.id)


def suspend(store: Store, table_id: str, pauser: DagPauser | None) -> DynamicTable:
    """Pause the refresh DAG and mark the table SUSPENDED; suspending twice is an error (as in Flink)."""
    from airflow_tablemgmt.store.dynamic import ACTIVE, CREATING, SUSPENDED, DynamicStateChanged

    dt = load_table(store, table_id)
    if dt.state == SUSPENDED:
        raise Conflict(f"dynamic table {table_id} is already suspended")
    if pauser is not None:
        pauser(dag_id_for(table_id, REFRESH), True)
    try:
        return store.dynamic.set_state(
            table_id, SUSPENDED, expected=(ACTIVE, CREATING), reason="suspended by a user"
        )
    except DynamicStateChanged:
        raise Conflict(f"dynamic table {table_id} is already suspended") from None


def resume(
    store: Store,
    table_id: str,
    pauser: DagPauser | None,
    dynamic_options: Mapping[str, Any] | None = None,
) -> DynamicTable:
    """Mark the table ACTIVE (failure count cleared, ``dynamic_options`` kept for later refreshes) and
    unpause its DAG. Resuming a table that is not suspended is an error."""
    from airflow_tablemgmt.store.dynamic import ACTIVE, SUSPENDED, DynamicStateChanged

    dt = load_table(store, table_id)
    if dt.state != SUSPENDED:
        raise Conflict(f"dynamic table {table_id} is not suspended (state {dt.state}); nothing to resume")
    options = check_options(dynamic_options, "dynamicOptions") if dynamic_options is not None else None
    try:
        dt = store.dynamic.set_state(
            table_id, ACTIVE, expected=(SUSPENDED,), dynamic_options=options, reset_failures=True
        )
    except DynamicStateChanged:
        raise Conflict(f"dynamic table {table_id} is not suspended; nothing to resume") from None
    if pauser is not None:
        pauser(dag_id_for(table_id, REFRESH), False)
    return dt


def alter(
    store: Store,
    table_id: str,
    freshness: str | None = None,
    query: str | None = None,
    recreate: bool = False,
    runner: Submitter | None = None,
    *,
    spark_conn_id: str = "spark_default",
    timeout: str | None = None,
    refresh_mode: str | None = None,
) -> AlterResult:
    """Change the freshness (the DAG is rescheduled on the next parse), the query, the timeout
    (how long one refresh may take: the refresh task's limit from the DAG's next parse, checked as at
    create, so a bad value names the field and what is allowed) and/or the refresh mode.

    ``INCREMENTAL`` is checked against the analysis of the query — a new query's, by Spark now, else the
    one its last refresh recorded (no Spark: REST's alter runs none) — and refused naming the construct
    that prevents it; a query never analysed yet is refused too, saying to refresh it first.

    A new query is analysed by Spark now: a query that fails, that no longer produces a partition
    column, or whose schema differs from the table's is an error unless ``recreate`` (then the table
    is dropped and created again from the new query, trigger CREATION). Nothing changes on error.
    """
    dt = load_table(store, table_id)
    check_store_owned(dt)
    if freshness is None and query is None and timeout is None and refresh_mode is None:
        raise InvalidInput("alter: give --freshness, --query, --timeout and/or --refresh-mode")
    current = dt.definition.model_dump(mode="json", by_alias=True)
    data = dict(current)
    changed: list[str] = []
    if freshness is not None:
        data["freshness"] = freshness
        changed.append("freshness")
    if query is not None:
        data["query"] = query
        changed.append("query")
    if timeout is not None:
        data["timeout"] = timeout
        changed.append("timeout")
    if refresh_mode is not None:
        data["refresh-mode"] = refresh_mode
        changed.append("refresh-mode")
    new = parse_definition(data, f"dynamic table {table_id}")
    if query is not None:
        check_upstreams(store, new)
    process: Process | None = None
    if query is None or new.query == dt.definition.query:
        _check_mode(new, dt.incremental, refresh_mode is not None)
    if query is not None and (new.query != dt.definition.query or recreate):
        analysis = _analyse(store, new, runner, spark_conn_id)  # INCREMENTAL it cannot have: refused there
        old_schema = [_column_key(c) for c in (current.get("schema") or [])]
        new_schema = [_column_key(c) for c in analysis.get("schema") or []]
        if old_schema and new_schema != old_schema and not recreate:
            raise InvalidInput(
                f"query: the new query's schema {_schema_text(new_schema)} differs from the table's "
                f"{_schema_text(old_schema)}; give --recreate to drop and recreate {table_id} from it"
            )
        new = parse_definition(
            {
                **new.model_dump(mode="json", by_alias=True),
                "schema": analysis.get("schema"),
                "source-tables": analysis.get("source_tables") or [],
            },
            f"dynamic table {table_id}",
        )
        if recreate:
            # The table is replaced in one commit by a refresh with the new query (recreate: the
            # job's CREATE OR REPLACE ... AS SELECT); until it succeeds the old definition stays.
            store.dynamic.upsert(new, dt.managed_by)
            _record_analysis(store, table_id, analysis)
            instant = datetime.now(UTC).replace(microsecond=0)
            params = refresh_parameters(MANUAL, False, instant, {}, {})
            params["recreate"] = True
            try:
                process = run_refresh_here(store, table_id, instant, params, runner, spark_conn_id)
            except Exception:
                store.dynamic.upsert(dt.definition, dt.managed_by)
                raise
            return AlterResult(store.dynamic.get(table_id), changed, process)
        store.dynamic.upsert(new, dt.managed_by)
        _record_analysis(store, table_id, analysis)
        return AlterResult(store.dynamic.get(table_id), changed, process)
    store.dynamic.upsert(new, dt.managed_by)
    return AlterResult(store.dynamic.get(table_id), changed, process)


def _check_mode(definition: DynamicTableSpec, analysis: Mapping[str, Any] | None, asked: bool) -> None:
    """Refuse ``INCREMENTAL`` (when it is what the alter asks for) unless the recorded analysis of the
    table's query says it can be maintained incrementally."""
    from airflow_tablemgmt.core.dynamic.incremental import (
        INCREMENTAL,
        Analysis,
        IncrementalNotPossible,
        check_declared,
    )

    if not asked or str(definition.refresh_mode) != INCREMENTAL:
        return
    if analysis is None:
        raise InvalidInput(
            f"refresh-mode: INCREMENTAL needs the analysis of the query of {definition.id}, which its refreshes "
            "record and none has yet; refresh it first (tablemgmt dt refresh), or give AUTO (refreshes "
            "incrementally where the query allows it, saying why not) or FULL"
        )
    try:
        check_declared(INCREMENTAL, Analysis.from_dict(analysis), definition.id)
    except IncrementalNotPossible as e:
        raise InvalidInput(str(e)) from None


def _record_analysis(store: Store, table_id: str, analysis: Mapping[str, Any]) -> None:
    """Keep the new query's incremental analysis (Spark's, from the alter's job) on the table."""
    if isinstance(analysis.get("incremental"), dict):
        store.dynamic.set_analysis(table_id, analysis["incremental"])


def _column_key(c: Any) -> tuple[str, str]:
    if isinstance(c, Mapping):
        return (str(c.get("name", "")).lower(), str(c.get("type", "")).lower())
    return (str(c).lower(), "")


def _schema_text(cols: list[tuple[str, str]]) -> str:
    return "(" + ", ".join(f"{n} {t}".strip() for n, t in cols) + ")"


def _analyse(
    store: Store, definition: DynamicTableSpec, runner: Submitter | None, spark_conn_id: str
) -> dict[str, Any]:
    """Spark's analysis of ``definition``'s query: ``{"schema", "source_tables"}``; nothing is created."""
    from airflow_tablemgmt.factories.dynamic import analyse_job

    if runner is None:
        from airflow_tablemgmt.hooks.spark_job import SparkJobHook

        runner = SparkJobHook(spark_conn_id)
    catalog = store.catalogs.get(definition.catalog)
    result = runner.submit(analyse_job(definition, catalog))
    if not result.ok:
        if result.error_class == "IncrementalNotPossible":  # the job's own message names the construct
            raise InvalidInput(
                result.error or f"refresh-mode: INCREMENTAL is not possible for {definition.id}"
            )
        raise InvalidInput(f"query: Spark rejected the query of {definition.id}: {result.error}")
    return dict(result.summary or {})


def drop(
    store: Store,
    table_id: str,
    purge: bool = False,
    runner: Submitter | None = None,
    pauser: DagPauser | None = None,
    *,
    spark_conn_id: str = "spark_default",
) -> DynamicTable:
    """Remove the workflow first (DAG paused, registration removed: the DAG file no longer builds it),
    then, only with ``purge``, drop the Iceberg table and its files. History stays."""
    dt = load_table(store, table_id)
    check_store_owned(dt)
    if pauser is not None:
        pauser(dag_id_for(table_id, REFRESH), True)
    store.dynamic.delete(table_id, Owner(dt.managed_by))
    if purge:
        from airflow_tablemgmt.factories.dynamic import drop_job

        if runner is None:
            from airflow_tablemgmt.hooks.spark_job import SparkJobHook

            runner = SparkJobHook(spark_conn_id)
        result = runner.submit(drop_job(dt.definition, store.catalogs.get(dt.definition.catalog)))
        if not result.ok:
            raise JobFailed(
                f"dynamic table {table_id}: the workflow was removed, but purging the table failed: "
                f"{result.error}"
            )
    return dt
