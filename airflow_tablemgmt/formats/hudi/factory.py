"""HudiProcessFactory: Hudi tables' ``compaction`` (merge-on-read, RFC-43's two phases), ``clean``,
``clustering`` and ``archive``, run as Hudi's own Spark procedures in a session with Hudi's extensions only.

A Hudi table is path-based, like a Delta one (``<warehouse>/<namespace>/<name>`` of a ``hadoop`` catalog).
Whether there is work is read from the ``.hoodie`` timeline without a JVM (``formats/hudi/metadata.py``):
compaction runs when a compaction is pending or at least ``min-delta-commits`` delta commits completed
since the last one; clean and clustering run when something was committed since the last clean or
clustering; archive runs when the active timeline holds more than ``max-commits`` completed commits.

RFC-43's two phases: the job schedules a compaction instant, then executes that instant. A pending
compaction is always executed before a new one is scheduled, and the instant to execute travels in the
job spec (``compaction-instant``), so it is recorded on the process's parameters: a retry of a process
whose attempt died after scheduling executes the instant that attempt scheduled, never a second one.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow_tablemgmt.core.factory import TriggerContext
from airflow_tablemgmt.core.process import Process
from airflow_tablemgmt.core.tables import TableSpec
from airflow_tablemgmt.formats.base import FormatFactory
from airflow_tablemgmt.formats.hudi import NAME
from airflow_tablemgmt.formats.hudi.actions import (
    COMPACTION_INSTANT_OPTION,
    HUDI_ARCHIVE,
    HUDI_CLEAN,
    HUDI_CLUSTERING,
    HUDI_COMPACTION,
)
from airflow_tablemgmt.metadata.errors import HealthUnavailable

log = logging.getLogger(__name__)


class HudiProcessFactory(FormatFactory):
    """Maps Hudi actions to Spark jobs; a compaction's instant is chosen from the timeline."""

    format = NAME

    def plan(
        self, table: TableSpec, action: str, options: dict[str, Any], context: TriggerContext
    ) -> dict[str, Any] | None:
        timeline = _timeline(table, context)
        if timeline is not None and action == HUDI_COMPACTION.name:
            if not timeline.merge_on_read:
                log.info(
                    "tablemgmt: compaction on %s: a %s table has nothing to compact",
                    table.id,
                    timeline.table_type,
                )
                return None
            pending = timeline.pending_compactions()
            if pending:
                options = {**options, COMPACTION_INSTANT_OPTION: pending[0]}
            elif timeline.delta_commits_since_compaction() < int(options["min-delta-commits"]):
                log.info(
                    "tablemgmt: compaction on %s: %d delta commits since the last compaction (< %s): skipped",
                    table.id,
                    timeline.delta_commits_since_compaction(),
                    options["min-delta-commits"],
                )
                return None
        if timeline is not None and action == HUDI_CLEAN.name and timeline.commits_since_clean() == 0:
            log.info("tablemgmt: clean on %s: nothing committed since the last clean: skipped", table.id)
            return None
        if (
            timeline is not None
            and action == HUDI_CLUSTERING.name
            and timeline.commits_since_clustering() == 0
        ):
            log.info(
                "tablemgmt: clustering on %s: nothing committed since the last clustering: skipped", table.id
            )
            return None
        if (
            timeline is not None
            and action == HUDI_ARCHIVE.name
            and timeline.active_commits() <= int(options["max-commits"])
        ):
            log.info(
                "tablemgmt: archive on %s: %d commits on the active timeline (<= max-commits %s): skipped",
                table.id,
                timeline.active_commits(),
                options["max-commits"],
            )
            return None
        return options

    def resume(
        self, table: TableSpec, process: Process, options: dict[str, Any], context: TriggerContext
    ) -> dict[str, Any]:
        """For a compaction, the instant the interrupted attempt scheduled (recorded on the process's
        parameters when it was chosen, else the oldest pending one on the timeline)."""
        if process.action == HUDI_COMPACTION.name:
            recorded = (process.parameters.get("options") or {}).get(COMPACTION_INSTANT_OPTION)
            timeline = _timeline(table, context)
            pending = timeline.pending_compactions() if timeline is not None else []
            instant = recorded if recorded in pending else (pending[0] if pending else None)
            if instant is not None:
                options = {**options, COMPACTION_INSTANT_OPTION: instant}
        return options


def _timeline(table: TableSpec, context: TriggerContext) -> Any:
    from airflow_tablemgmt.formats.hudi.metadata import read_timeline
    from airflow_tablemgmt.metadata.table_dir import StoreUnreachable, readable_catalog
    from airflow_tablemgmt.metadata.table_paths import table_location

    catalog = readable_catalog(context)
    try:
        return read_timeline(table_location(catalog, table.identifier), catalog.properties)
    except StoreUnreachable as e:  # the job could not read it either: fail before any Spark starts
        raise StoreUnreachable(f"{table.id}: {e}") from None
    except HealthUnavailable as e:  # not readable here: the job decides on Hudi's own timeline
        log.info("tablemgmt: %s: the Hudi timeline is not readable here (%s)", table.id, e)
        return None


__all__ = ["HudiProcessFactory"]
