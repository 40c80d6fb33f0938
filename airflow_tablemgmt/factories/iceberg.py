"""IcebergProcessFactory: every Iceberg maintenance action, run through Iceberg's own Spark procedures."""

from __future__ import annotations

from airflow_tablemgmt.core.actions import (
    COMPUTE_STATS,
    DELETE_ORPHANS,
    EXPIRE_DATA,
    EXPIRE_SNAPSHOTS,
    REWRITE_DELETES,
    REWRITE_FILES,
    REWRITE_MANIFESTS,
)
from airflow_tablemgmt.core.errors import ActionNotSupported, RecoverProcessFailed
from airflow_tablemgmt.core.factory import JobSpec, TriggerContext
from airflow_tablemgmt.core.formats import TableFormat
from airflow_tablemgmt.core.process import Process
from airflow_tablemgmt.core.tables import TableSpec
from airflow_tablemgmt.core.triggers import Interval, TriggerStrategy

# Defaults chosen so a freshly registered table gets sensible upkeep without tuning:
# compaction-type work only when something was written (on_new_snapshot), cleanup daily.
DEFAULT_STRATEGIES: dict[str, TriggerStrategy] = {
    REWRITE_FILES.name: TriggerStrategy(Interval.parse("1h"), on_new_snapshot=True, parallelism=4),
    REWRITE_DELETES.name: TriggerStrategy(Interval.parse("1h"), on_new_snapshot=True, parallelism=4),
    REWRITE_MANIFESTS.name: TriggerStrategy(Interval.parse("1d"), on_new_snapshot=True, parallelism=2),
    EXPIRE_SNAPSHOTS.name: TriggerStrategy(Interval.parse("1d"), on_new_snapshot=False, parallelism=4),
    DELETE_ORPHANS.name: TriggerStrategy(Interval.parse("1d"), on_new_snapshot=False, parallelism=2),
    EXPIRE_DATA.name: TriggerStrategy(Interval.parse("1d"), on_new_snapshot=False, parallelism=2),
    COMPUTE_STATS.name: TriggerStrategy(Interval.parse("1d"), on_new_snapshot=True, parallelism=2),
}


class IcebergProcessFactory:
    """Maps Iceberg actions to Spark jobs. Every Iceberg procedure commits atomically or not at all,
    so recovering an interrupted process means running the same job again."""

    name = "iceberg"

    def supported_actions(self) -> dict[TableFormat, set[str]]:
        return {TableFormat.ICEBERG: set(DEFAULT_STRATEGIES)}

    def trigger_strategy(self, format: TableFormat, action: str) -> TriggerStrategy:
        if format != TableFormat.ICEBERG or action not in DEFAULT_STRATEGIES:
            raise ActionNotSupported(
                f"the iceberg factory does not support {format}/{action}; supported: {', '.join(sorted(DEFAULT_STRATEGIES))}"
            )
        return DEFAULT_STRATEGIES[action]

    def trigger(self, table: TableSpec, action: str, context: TriggerContext) -> JobSpec | None:
        strategy = self.trigger_strategy(table.format, action)
        settings = table.action_settings(action)
        on_new_snapshot = (
            strategy.on_new_snapshot if settings.on_new_snapshot is None else settings.on_new_snapshot
        )
        if (
            on_new_snapshot
            and context.current_snapshot_id is not None
            and context.current_snapshot_id == context.last_snapshot_id
        ):
            return None
        return JobSpec.build(table, context.catalog, action, settings.options())

    def recover(self, table: TableSpec, process: Process, context: TriggerContext) -> JobSpec:
        if process.action not in DEFAULT_STRATEGIES:
            raise RecoverProcessFailed(
                f"process {process.id}: action {process.action!r} is no longer supported"
            )
        return JobSpec.build(
            table, context.catalog, process.action, table.action_settings(process.action).options()
        )
