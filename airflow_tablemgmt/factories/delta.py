"""DeltaProcessFactory: Delta Lake tables' ``optimize`` and ``vacuum``, run as Delta's own SQL in a session
with Delta's extensions only.

A Delta table is path-based: declared in a ``hadoop`` catalog whose ``warehouse`` is the tables' root,
it lives at ``<warehouse>/<namespace>/<name>`` (``delta.`<path>``` in Spark SQL). Whether there is work
is read from the ``_delta_log`` without a JVM (``metadata/delta.py``; on S3 through pyarrow with the
catalog's ``spark.hadoop.fs.s3a.*``): ``optimize`` is skipped when fewer than ``min-new-files`` files were
added since the last ``OPTIMIZE``. ``vacuum``'s first run, and the first after ``retain`` changes, is a dry
run unless ``confirm: true`` (expire-data's policy).
"""

from __future__ import annotations

import logging
from typing import Any

from airflow_tablemgmt.core.errors import ActionNotSupported, RecoverProcessFailed
from airflow_tablemgmt.core.factory import JobSpec, TriggerContext, declined
from airflow_tablemgmt.core.format_actions import (
    OPTIMIZE,
    TABLE_LOCATION_OPTION,
    VACUUM,
    VACUUM_DRY_RUN_REASON_OPTION,
)
from airflow_tablemgmt.core.formats import TableFormat
from airflow_tablemgmt.core.process import Process
from airflow_tablemgmt.core.tables import TableSpec
from airflow_tablemgmt.core.triggers import Interval, TriggerStrategy
from airflow_tablemgmt.factories.api import declare_health, declare_views
from airflow_tablemgmt.factories.path_formats import (
    ENGINES,
    FormatSupport,
    location_refusal,
    path_job,
    retention_changed,
)
from airflow_tablemgmt.metadata import delta_views
from airflow_tablemgmt.metadata.errors import HealthUnavailable

log = logging.getLogger(__name__)

# on_new_snapshot stays False: the snapshot gate and watchers read Iceberg metadata; a Delta action's
# own check (the log since the last OPTIMIZE) runs in trigger().
DEFAULT_STRATEGIES: dict[str, TriggerStrategy] = {
    OPTIMIZE.name: TriggerStrategy(Interval.parse("1h"), on_new_snapshot=False, parallelism=4),
    VACUUM.name: TriggerStrategy(Interval.parse("1d"), on_new_snapshot=False, parallelism=2),
}


class DeltaProcessFactory:
    """Maps Delta actions to Spark jobs. ``OPTIMIZE`` and ``VACUUM`` are idempotent (an interrupted
    ``OPTIMIZE`` commits nothing; a second ``VACUUM`` deletes what the first did not), so recovering a
    process means running the same job again."""

    name = "delta"
    support = FormatSupport(TableFormat.DELTA, DEFAULT_STRATEGIES, ENGINES, "delta")

    def supported_actions(self) -> dict[TableFormat, set[str]]:
        return {TableFormat.DELTA: set(DEFAULT_STRATEGIES)}

    def trigger_strategy(self, format: TableFormat, action: str) -> TriggerStrategy:
        if format != TableFormat.DELTA or action not in DEFAULT_STRATEGIES:
            raise ActionNotSupported(
                f"the delta factory does not support {format}/{action}; supported: "
                f"{', '.join(sorted(DEFAULT_STRATEGIES))}"
            )
        return DEFAULT_STRATEGIES[action]

    def trigger(
        self, table: TableSpec, action: str, context: TriggerContext
    ) -> JobSpec | dict[str, Any] | None:
        self.trigger_strategy(table.format, action)
        refused = location_refusal(table, action, context)
        if refused is not None:
            log.warning("tablemgmt: %s", refused)
            return declined(refused)
        options = table.action_settings(action).options()
        if action == OPTIMIZE.name and not self._optimize_pays(table, options, context):
            return None
        return self._job(table, action, options, context)

    def recover(self, table: TableSpec, process: Process, context: TriggerContext) -> JobSpec:
        if process.action not in DEFAULT_STRATEGIES:
            raise RecoverProcessFailed(
                f"process {process.id}: action {process.action!r} is not a Delta action"
            )
        return self._job(table, process.action, table.action_settings(process.action).options(), context)

    def _job(
        self, table: TableSpec, action: str, options: dict[str, Any], context: TriggerContext
    ) -> JobSpec:
        if action == VACUUM.name and not options.get("dry-run") and not options.get("confirm"):
            reason = retention_changed("vacuum", "retain", options, context)
            if reason is not None:
                log.warning("tablemgmt: vacuum on %s: %s", table.id, reason)
                options = {**options, VACUUM_DRY_RUN_REASON_OPTION: reason}
        return path_job(table, action, options, context, "delta")

    def _optimize_pays(self, table: TableSpec, options: dict[str, Any], context: TriggerContext) -> bool:
        """False when the log shows fewer new files than ``min-new-files`` since the last OPTIMIZE."""
        minimum = int(options.get("min-new-files", 1))
        if minimum == 0:
            return True
        from airflow_tablemgmt.metadata.delta import read_delta
        from airflow_tablemgmt.metadata.table_dir import StoreUnreachable, readable_catalog
        from airflow_tablemgmt.metadata.table_paths import table_location

        catalog = readable_catalog(context)
        try:
            state = read_delta(table_location(catalog, table.identifier), catalog.properties)
        except StoreUnreachable as e:  # the job could not read it either: fail before any Spark starts
            raise StoreUnreachable(f"optimize on {table.id}: {e}") from None
        except HealthUnavailable as e:  # not readable here (e.g. not a Delta table yet): the job decides
            log.info(
                "tablemgmt: optimize on %s: the Delta log is not readable here (%s); running", table.id, e
            )
            return True
        if state.changes.files_added < minimum:
            log.info(
                "tablemgmt: optimize on %s: %d files added since the last OPTIMIZE (< min-new-files %d): skipped",
                table.id,
                state.changes.files_added,
                minimum,
            )
            return False
        return True


def _health(catalog: Any, table: TableSpec) -> Any:
    from airflow_tablemgmt.metadata.delta import table_health

    return table_health(catalog, table)


declare_health(TableFormat.DELTA, _health)  # the page's, the CLI's and the REST API's health of its tables
declare_views(TableFormat.DELTA, **delta_views.VIEWS)  # the page's Details, Files and Snapshots tabs

__all__ = ["DEFAULT_STRATEGIES", "TABLE_LOCATION_OPTION", "DeltaProcessFactory"]
