"""SnapshotGateOperator: skip the run when the table has no snapshot newer than the last success."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowSkipException

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook


class SnapshotGateOperator(BaseOperator):
    """Checks with pyiceberg (no JVM; its cost: ``benchmarks/gate_cost.py``) whether ``table`` has a
    snapshot other than the one the last successful process of ``action`` left behind. If not, the
    run ends as *skipped*, not failed, and no Spark job starts. Returns the current snapshot id (XCom).
    The catalog's secret references are resolved on the worker, for this check only."""

    template_fields: Sequence[str] = ("table", "action")
    ui_color = "#eaf2f8"
    # On the class, set on an instance only when it differs (see TableMaintenanceOperator).
    tablemgmt_conn_id: str = TableMgmtHook.default_conn_name

    def __init__(
        self,
        *,
        table: str,
        action: str,
        tablemgmt_conn_id: str = TableMgmtHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.table = table
        self.action = action
        if tablemgmt_conn_id != type(self).tablemgmt_conn_id:
            self.tablemgmt_conn_id = tablemgmt_conn_id

    def execute(self, context: Any) -> int | None:
        from airflow_tablemgmt.hooks.secrets import resolve_catalog_spec
        from airflow_tablemgmt.metadata.iceberg import SnapshotReader

        store = TableMgmtHook(self.tablemgmt_conn_id).get_store()
        spec = store.tables.get(self.table)
        # The store holds secret references; they resolve here, on the worker, and are masked in logs.
        reader = SnapshotReader(resolve_catalog_spec(store.catalogs.get(spec.catalog)))
        last = store.processes.last_successful(self.table, self.action)
        last_seen = last.snapshot_id if last else None
        changed, current = reader.has_new_snapshot(TableIdentifier.parse(self.table), last_seen)
        if last is not None and not changed:
            raise AirflowSkipException(
                f"tablemgmt: {self.table} is still at snapshot {current}, which process {last.id} "
                f"({self.action}) already handled; nothing to do"
            )
        self.log.info(
            "tablemgmt: %s at snapshot %s (last handled: %s); running %s",
            self.table,
            current,
            last_seen,
            self.action,
        )
        return current
