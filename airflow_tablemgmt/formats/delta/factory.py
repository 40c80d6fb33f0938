"""DeltaProcessFactory: Delta Lake tables' ``optimize`` and ``vacuum``, run as Delta's own SQL in a session
with Delta's extensions only.

A Delta table is path-based: declared in a ``hadoop`` catalog whose ``warehouse`` is the tables' root,
it lives at ``<warehouse>/<namespace>/<name>`` (``delta.`<path>``` in Spark SQL). Whether there is work
is read from the ``_delta_log`` without a JVM (``formats/delta/metadata.py``; on S3 through pyarrow with the
catalog's ``spark.hadoop.fs.s3a.*``): ``optimize`` is skipped when fewer than ``min-new-files`` files were
added since the last ``OPTIMIZE``. ``vacuum``'s first run, and the first after ``retain`` changes, is a dry
run unless ``confirm: true`` (expire-data's policy).
"""

from __future__ import annotations

import logging
from typing import Any

from airflow_tablemgmt.core.factory import TriggerContext
from airflow_tablemgmt.core.process import Process
from airflow_tablemgmt.core.tables import TableSpec
from airflow_tablemgmt.factories.path_formats import retention_changed
from airflow_tablemgmt.formats.base import FormatFactory
from airflow_tablemgmt.formats.delta import NAME
from airflow_tablemgmt.formats.delta.actions import OPTIMIZE, VACUUM, VACUUM_DRY_RUN_REASON_OPTION
from airflow_tablemgmt.metadata.errors import HealthUnavailable

log = logging.getLogger(__name__)


class DeltaProcessFactory(FormatFactory):
    """Maps Delta actions to Spark jobs. ``OPTIMIZE`` and ``VACUUM`` are idempotent (an interrupted
    ``OPTIMIZE`` commits nothing; a second ``VACUUM`` deletes what the first did not), so recovering a
    process means running the same job again."""

    format = NAME

    def plan(
        self, table: TableSpec, action: str, options: dict[str, Any], context: TriggerContext
    ) -> dict[str, Any] | None:
        if action == OPTIMIZE.name and not self._optimize_pays(table, options, context):
            return None
        return self._vacuum_policy(table, action, options, context)

    def gated(self, action: str, options: dict[str, Any]) -> bool:
        """A Z-order OPTIMIZE reclusters whatever the files' sizes: the small-files finding does not decide it."""
        return super().gated(action, options) and not (action == OPTIMIZE.name and options.get("zorder-by"))

    def resume(
        self, table: TableSpec, process: Process, options: dict[str, Any], context: TriggerContext
    ) -> dict[str, Any]:
        return self._vacuum_policy(table, process.action, options, context)

    def _vacuum_policy(
        self, table: TableSpec, action: str, options: dict[str, Any], context: TriggerContext
    ) -> dict[str, Any]:
        if action == VACUUM.name and not options.get("dry-run") and not options.get("confirm"):
            reason = retention_changed("vacuum", "retain", options, context)
            if reason is not None:
                log.warning("tablemgmt: vacuum on %s: %s", table.id, reason)
                options = {**options, VACUUM_DRY_RUN_REASON_OPTION: reason}
        return options

    def _optimize_pays(self, table: TableSpec, options: dict[str, Any], context: TriggerContext) -> bool:
        """False when the log shows fewer new files than ``min-new-files`` since the last OPTIMIZE."""
        minimum = int(options.get("min-new-files", 1))
        if minimum == 0:
            return True
        from airflow_tablemgmt.formats.delta.metadata import read_delta
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


__all__ = ["DeltaProcessFactory"]
