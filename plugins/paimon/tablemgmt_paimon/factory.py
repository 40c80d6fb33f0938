"""PaimonProcessFactory: the ``paimon`` format's jobs, written against the public format API only
(``airflow_tablemgmt.formats.api``); its descriptor is ``format.py``.

A Paimon table is declared in a ``hadoop`` catalog whose ``warehouse`` is a Paimon filesystem catalog's
warehouse; the job configures that catalog as Paimon's ``SparkCatalog`` under the catalog's name and
calls Paimon's procedures on ``<namespace>.<name>``. Whether ``compact`` or ``expire-snapshots`` pays is
read from the table's snapshot files without a JVM (``snapshots.py``); a table that cannot be read here
(e.g. on S3) always runs. ``remove-orphans``' first run (and the first after ``older-than`` changes) is a
dry run unless ``confirm: true``.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow_tablemgmt.formats.api import FormatFactory, Process, TableSpec, TriggerContext, retention_changed
from tablemgmt_paimon import FORMAT
from tablemgmt_paimon.actions import COMPACT, EXPIRE_SNAPSHOTS, REMOVE_ORPHANS
from tablemgmt_paimon.snapshots import NotReadable, read_table, table_location

log = logging.getLogger(__name__)


class PaimonProcessFactory(FormatFactory):
    """Maps Paimon actions to Spark jobs. Paimon's procedures commit atomically (an interrupted compaction
    commits nothing; a second expiry removes what the first did not), so recovering a process runs the
    same job again."""

    format = FORMAT

    def plan(
        self, table: TableSpec, action: str, options: dict[str, Any], context: TriggerContext
    ) -> dict[str, Any] | None:
        if not self._pays(table, action, options, context):
            return None
        return self._orphans_policy(table, action, options, context)

    def gated(self, action: str, options: dict[str, Any]) -> bool:
        """A sorting or space-filling compaction rewrites by choice: the commits finding does not decide it."""
        sorting = action == COMPACT.name and options.get("order-strategy", "none") != "none"
        return super().gated(action, options) and not sorting

    def resume(
        self, table: TableSpec, process: Process, options: dict[str, Any], context: TriggerContext
    ) -> dict[str, Any]:
        return self._orphans_policy(table, process.action, options, context)

    def commit_marks(self, table: TableSpec, catalog: Any) -> list[tuple[str, int, int]]:
        """The table's snapshots newest first as ``(commit user, snapshot id, commit time ms)``: recovery
        (``lifecycle/table_marks.py``) finds there the process attempt whose ``compact`` committed (its
        commit user starts with the job's ``commit_user_prefix()``). Raises NotReadable for a table that
        is not on a local warehouse (recovery then runs the job again)."""
        state = read_table(table_location(catalog.warehouse or "", table.namespace, table.name))
        return [(s.commit_user, s.id, s.time_millis) for s in reversed(state.snapshots)]

    def _orphans_policy(
        self, table: TableSpec, action: str, options: dict[str, Any], context: TriggerContext
    ) -> dict[str, Any]:
        if action == REMOVE_ORPHANS.name and not options.get("dry-run") and not options.get("confirm"):
            reason = retention_changed(action, "older-than", options, context)
            if reason is not None:
                log.warning("tablemgmt: remove-orphans on %s: %s", table.id, reason)
                options = {**options, "dry-run": True, "dry-run-reason": reason}
        return options

    def _pays(self, table: TableSpec, action: str, options: dict[str, Any], context: TriggerContext) -> bool:
        if action not in (COMPACT.name, EXPIRE_SNAPSHOTS.name):
            return True
        warehouse = context.catalog.warehouse or ""
        try:
            state = read_table(table_location(warehouse, table.namespace, table.name))
        except NotReadable as e:
            log.info("tablemgmt: %s on %s: not readable here (%s); running", action, table.id, e)
            return True
        if action == COMPACT.name:
            minimum = int(options.get("min-new-snapshots", 1))
            commits = state.commits_since_compaction()
            if commits < minimum:
                log.info(
                    "tablemgmt: compact on %s: %d commits since the last compaction (< min-new-snapshots %d): "
                    "skipped",
                    table.id,
                    commits,
                    minimum,
                )
                return False
            return True
        retain_min = int(options.get("retain-min", 1))
        if len(state.snapshots) <= retain_min:
            log.info(
                "tablemgmt: expire-snapshots on %s: %d snapshot(s), retain-min %d: skipped",
                table.id,
                len(state.snapshots),
                retain_min,
            )
            return False
        return True
