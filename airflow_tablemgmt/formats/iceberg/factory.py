"""IcebergProcessFactory: every Iceberg maintenance action, run through Iceberg's own Spark procedures."""

from __future__ import annotations

import logging
import os
from datetime import timedelta
from functools import lru_cache
from typing import Any

from pydantic import TypeAdapter

from airflow_tablemgmt.core.durations import Duration
from airflow_tablemgmt.core.errors import RecoverProcessFailed
from airflow_tablemgmt.core.factory import TriggerContext
from airflow_tablemgmt.core.process import Process
from airflow_tablemgmt.core.tables import CatalogType, TableSpec
from airflow_tablemgmt.formats.base import HEALTH_GATE_ENV, FormatFactory
from airflow_tablemgmt.formats.iceberg import NAME
from airflow_tablemgmt.formats.iceberg.actions import (
    COMPUTE_STATS,
    DELETE_ORPHANS,
    DRY_RUN_REASON_OPTION,
    EXPIRE_DATA,
    EXPIRE_SNAPSHOTS,
    KEEP_SNAPSHOTS_OPTION,
)

log = logging.getLogger(__name__)


class IcebergProcessFactory(FormatFactory):
    """Maps Iceberg actions to Spark jobs. Every Iceberg procedure commits atomically or not at all,
    so recovering an interrupted process means running the same job again."""

    format = NAME

    def refusal(self, table: TableSpec, action: str, context: TriggerContext) -> str | None:
        """A hadoop catalog's table missing at its path, or a table whose ``gc.enabled`` forbids the action."""
        if context.catalog.type == CatalogType.HADOOP:
            from airflow_tablemgmt.factories.path_formats import location_refusal

            refused = location_refusal(table, action, context)
            if refused is not None:
                return refused
        return gc_refusal(table, action, context)

    def plan(
        self, table: TableSpec, action: str, options: dict[str, Any], context: TriggerContext
    ) -> dict[str, Any] | None:
        settings = table.action_settings(action)
        strategy = self.descriptor.strategies[action]
        on_new_snapshot = (
            strategy.on_new_snapshot if settings.on_new_snapshot is None else settings.on_new_snapshot
        )
        if (
            on_new_snapshot
            and context.current_snapshot_id is not None
            and context.current_snapshot_id == context.last_snapshot_id
        ):
            return None
        return self._run_options(table, action, options, context)

    def health_gate(self, table: TableSpec, action: str, context: TriggerContext) -> dict[str, Any] | None:
        """The health gate (the base's), and for compute-stats and expire-data, which the score does not
        measure, a skip when the metadata shows their run would change nothing (``metadata/nothing_to_do.py``:
        statistics for the current snapshot exist; no row past the retention)."""
        if (
            action not in (COMPUTE_STATS.name, EXPIRE_DATA.name)
            or os.environ.get(HEALTH_GATE_ENV, "1") == "0"
        ):
            return super().health_gate(table, action, context)
        from airflow_tablemgmt.metadata.nothing_to_do import nothing_to_do

        catalog = context.resolve_catalog(context.catalog) if context.resolve_catalog else context.catalog
        try:
            idle = nothing_to_do(catalog, table, action, table.action_settings(action).options())
        except Exception as e:  # noqa: BLE001 - unreadable here: the job decides, as before the gate
            log.info("tablemgmt: %s on %s: metadata not readable here (%s); running it", action, table.id, e)
            return None
        if idle is None:
            return None
        log.info("tablemgmt: %s on %s skipped, nothing to do: %s", action, table.id, idle.reason)
        return idle.summary()

    def resume(
        self, table: TableSpec, process: Process, options: dict[str, Any], context: TriggerContext
    ) -> dict[str, Any]:
        refused = gc_refusal(table, process.action, context)
        if refused is not None:
            raise RecoverProcessFailed(f"process {process.id}: {refused}")
        return self._run_options(table, process.action, options, context)

    def _run_options(
        self, table: TableSpec, action: str, options: dict[str, Any], context: TriggerContext
    ) -> dict[str, Any]:
        """The job's options for this run: an expiry told what dynamic tables still read, an expire-data
        turned into a dry run by :func:`first_run_reason`."""
        if action == EXPIRE_SNAPSHOTS.name and context.retain_snapshots:
            # The snapshots dynamic tables read their next change from (lifecycle/retention.py).
            return {**options, KEEP_SNAPSHOTS_OPTION: dict(context.retain_snapshots)}
        if action != EXPIRE_DATA.name or options.get("dry-run") or options.get("confirm"):
            return options
        reason = first_run_reason(options, context)
        if reason is None:
            return options
        log.warning("tablemgmt: expire-data on %s: %s", table.id, reason)
        return {**options, "dry-run": True, DRY_RUN_REASON_OPTION: reason}


#: The actions that delete files and that Iceberg refuses on a table whose ``gc.enabled`` is false
#: (``ValidationException: Cannot expire snapshots: GC is disabled``, after the job started).
GC_ACTIONS = frozenset({EXPIRE_SNAPSHOTS.name, DELETE_ORPHANS.name})
GC_ENABLED = "gc.enabled"


def gc_refusal(table: TableSpec, action: str, context: TriggerContext) -> str | None:
    """Why ``action`` cannot run on ``table`` because its ``gc.enabled`` property is false, or None.

    Read from the table's current metadata without a JVM. Project Nessie creates its tables with
    ``gc.enabled=false`` (its own GC deletes files): Iceberg would refuse the job after its Spark start,
    and again on every schedule. Metadata that cannot be read here leaves the decision to the job."""
    if action not in GC_ACTIONS:
        return None
    from airflow_tablemgmt.metadata.iceberg import SnapshotReader

    catalog = context.resolve_catalog(context.catalog) if context.resolve_catalog else context.catalog
    try:
        properties = SnapshotReader(catalog).table_properties(table.identifier)
    except Exception as e:  # noqa: BLE001 - unreadable here (a secret, the network): the job decides
        log.info(
            "tablemgmt: %s: table properties not readable here (%s); the job checks gc.enabled", table.id, e
        )
        return None
    value = properties.get(GC_ENABLED)
    if value is None or value.strip().lower() != "false":
        return None
    return (
        f"table property {GC_ENABLED} is {value!r} on {table.id}: Iceberg deletes no files of such a table "
        f"(a catalog such as Project Nessie sets it and collects garbage itself), so {action} is declined "
        f"before any Spark job; set {GC_ENABLED}=true on the table to let {action} run, or disable "
        f"{action} for it"
    )


def first_run_reason(options: dict[str, Any], context: TriggerContext) -> str | None:
    """Why this expire-data run must be a dry run, or None when it may delete.

    It may delete once a successful run (a dry run counts: its report is what the user reviews)
    used the same ``column`` and ``retention``. The first run of a table, and the first run
    after either setting changed, deletes nothing: a wrong column or a retention typo would
    otherwise remove data on the spot. ``confirm: true`` skips the policy.
    """
    column, retention = str(options["column"]), str(options["retention"])
    last = context.last_success
    previous = last.parameters.get("options") if last is not None else None
    if not isinstance(previous, dict) or "column" not in previous or "retention" not in previous:
        return (
            f"first run of expire-data with retention {retention} on column {column}: dry run; "
            "set confirm: true to delete on the first run"
        )
    changes = []
    if str(previous["column"]).lower() != column.lower():
        changes.append(f"column changed from {previous['column']} to {column}")
    if not _same_duration(previous["retention"], retention):
        changes.append(f"retention changed from {previous['retention']} to {retention}")
    if not changes:
        return None
    return (
        f"{' and '.join(changes)} since the last successful run: dry run; the next run deletes; "
        "set confirm: true to delete on the first run after a change"
    )


@lru_cache(maxsize=1)
def _duration() -> TypeAdapter[timedelta]:
    """Built on first use: only expire-data's first-run policy compares durations."""
    return TypeAdapter(Duration)


def _same_duration(previous: object, current: str) -> bool:
    try:
        return bool(_duration().validate_python(previous) == _duration().validate_python(current))
    except Exception:  # noqa: BLE001 - an unreadable old value counts as a change (the safe side)
        return False
