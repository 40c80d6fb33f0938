"""IcebergProcessFactory: every Iceberg maintenance action, run through Iceberg's own Spark procedures."""

from __future__ import annotations

import logging
from datetime import timedelta
from functools import lru_cache
from typing import Any

from pydantic import TypeAdapter

from airflow_tablemgmt.core.actions import (
    COMPUTE_STATS,
    DELETE_ORPHANS,
    DRY_RUN_REASON_OPTION,
    EXPIRE_DATA,
    EXPIRE_SNAPSHOTS,
    REWRITE_DELETES,
    REWRITE_FILES,
    REWRITE_MANIFESTS,
)
from airflow_tablemgmt.core.durations import Duration
from airflow_tablemgmt.core.errors import ActionNotSupported, RecoverProcessFailed
from airflow_tablemgmt.core.factory import JobSpec, TriggerContext, declined
from airflow_tablemgmt.core.formats import TableFormat
from airflow_tablemgmt.core.process import Process
from airflow_tablemgmt.core.tables import TableSpec
from airflow_tablemgmt.core.triggers import Interval, TriggerStrategy
from airflow_tablemgmt.factories.api import declare_views
from airflow_tablemgmt.factories.path_formats import location_refusal

log = logging.getLogger(__name__)

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

    def trigger(
        self, table: TableSpec, action: str, context: TriggerContext
    ) -> JobSpec | dict[str, Any] | None:
        strategy = self.trigger_strategy(table.format, action)
        refused = location_refusal(table, action, context) if context.catalog.type == "hadoop" else None
        if refused is not None:
            log.warning("tablemgmt: %s", refused)
            return declined(refused)
        refused = gc_refusal(table, action, context)
        if refused is not None:
            log.warning("tablemgmt: %s on %s declined: %s", action, table.id, refused)
            return declined(refused)
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
        return JobSpec.build(table, context.catalog, action, self._options(table, action, context))

    def recover(self, table: TableSpec, process: Process, context: TriggerContext) -> JobSpec:
        if process.action not in DEFAULT_STRATEGIES:
            raise RecoverProcessFailed(
                f"process {process.id}: action {process.action!r} is no longer supported"
            )
        refused = gc_refusal(table, process.action, context)
        if refused is not None:
            raise RecoverProcessFailed(f"process {process.id}: {refused}")
        return JobSpec.build(
            table, context.catalog, process.action, self._options(table, process.action, context)
        )

    def _options(self, table: TableSpec, action: str, context: TriggerContext) -> dict[str, Any]:
        options = table.action_settings(action).options()
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


def _iceberg_view(tab: str) -> Any:
    """``metadata/table_views.py``'s reader of ``tab``, imported on first use (pyiceberg is loaded then)."""

    def read(catalog: Any, table: TableSpec) -> dict[str, Any]:
        from airflow_tablemgmt.metadata import table_views

        return dict(getattr(table_views, f"read_{tab}")(catalog, table))

    read.__name__ = f"iceberg_{tab}"
    return read


# The table page's Details, Files and Snapshots tabs (and the REST API's) of Iceberg tables, read with pyiceberg.
declare_views(
    TableFormat.ICEBERG,
    details=_iceberg_view("details"),
    files=_iceberg_view("files"),
    snapshots=_iceberg_view("snapshots"),
)
