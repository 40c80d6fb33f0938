"""The OpenLineage extractor of ``TableMaintenanceOperator``: its inputs and outputs, and a ``tablemgmt``
job facet with the process (id, action, attempt, status, figures).

Enabled with ``[openlineage] extractors = airflow_tablemgmt.lineage.extractor.TableMgmtExtractor`` (the
OpenLineage provider then uses it for every maintenance and refresh task). A maintenance action reads and
rewrites its table: the table is its input and its output. A refresh reads the dynamic table's source
tables (recorded at creation from Spark's analysis of the query) and writes the dynamic table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attr
from airflow.providers.openlineage.extractors.base import BaseExtractor, OperatorLineage
from openlineage.client.event_v2 import Dataset
from openlineage.client.facet_v2 import JobFacet, symlinks_dataset

from airflow_tablemgmt.lineage.naming import table_dataset

if TYPE_CHECKING:
    from airflow_tablemgmt.store import Store

REFRESH = "refresh"
FACET = "tablemgmt"


@attr.define
class TableMgmtJobFacet(JobFacet):
    """What tablemgmt knows of the task's process: which one, and what it did."""

    table: str = attr.field(default="", kw_only=True)
    action: str = attr.field(default="", kw_only=True)
    processId: int | None = attr.field(default=None, kw_only=True)  # noqa: N815 - OpenLineage's camelCase
    attempt: int | None = attr.field(default=None, kw_only=True)
    status: str | None = attr.field(default=None, kw_only=True)
    failureReason: str | None = attr.field(default=None, kw_only=True)  # noqa: N815
    figures: dict[str, Any] = attr.field(factory=dict, kw_only=True)

    @staticmethod
    def _get_schema() -> str:
        return "https://github.com/airflow-tablemgmt/airflow-tablemgmt/docs/lineage.md#TableMgmtJobFacet"


def _dataset(store: Store, table_id: str) -> Dataset:
    # The first part is the catalog, the last the table, the rest the namespace (one level or several).
    catalog_name, *levels, name = table_id.split(".")
    namespace = ".".join(levels)
    names = table_dataset(store.catalogs.get(catalog_name), namespace, name)
    symlink = symlinks_dataset.Identifier(
        namespace=names.table_namespace, name=names.table_name, type="TABLE"
    )
    return Dataset(
        namespace=names.namespace,
        name=names.name,
        facets={"symlinks": symlinks_dataset.SymlinksDatasetFacet(identifiers=[symlink])},
    )


class TableMgmtExtractor(BaseExtractor):
    @classmethod
    def get_operator_classnames(cls) -> list[str]:
        return ["TableMaintenanceOperator"]

    def _store(self) -> Store:
        from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook

        conn_id = getattr(self.operator, "tablemgmt_conn_id", TableMgmtHook.default_conn_name)
        return TableMgmtHook(conn_id).get_store(create=False)

    def _execute_extraction(self) -> OperatorLineage:
        table_id, action = self.operator.table, self.operator.action
        store = self._store()
        output = _dataset(store, table_id)
        if action != REFRESH:
            return OperatorLineage(inputs=[output], outputs=[output])
        dt = store.dynamic.find(table_id)
        sources = list(getattr(dt.definition, "source_tables", None) or []) if dt is not None else []
        return OperatorLineage(inputs=[_dataset(store, s) for s in sources], outputs=[output])

    def extract_on_complete(self, task_instance: Any) -> OperatorLineage:
        lineage = self.extract() or OperatorLineage()
        store = self._store()
        table_id, action = self.operator.table, self.operator.action
        run_id = getattr(task_instance, "run_id", None)
        process = next(
            (
                p
                for p in store.processes.list(table_id=table_id, action=action, limit=20)
                if p.run_id == run_id
            ),
            None,
        )
        facet = TableMgmtJobFacet(table=table_id, action=action)
        if process is not None:
            facet = TableMgmtJobFacet(
                table=table_id,
                action=action,
                processId=process.id,
                attempt=process.attempt,
                status=str(process.status),
                failureReason=process.failure_reason,
                figures=dict(process.summary or {}),
            )
        lineage.job_facets[FACET] = facet
        return lineage
