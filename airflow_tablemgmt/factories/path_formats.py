"""What the path-based formats' factories (Delta, Hudi) share: the declaration of what a format supports,
the job spec of a table at ``<warehouse>/<namespace>/<name>``, and the first-run dry-run policy of a
destructive action whose retention changed."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from airflow_tablemgmt.core.factory import JobSpec, TriggerContext
from airflow_tablemgmt.core.format_actions import TABLE_FORMAT_PROPERTY, TABLE_LOCATION_OPTION
from airflow_tablemgmt.core.formats import TableFormat
from airflow_tablemgmt.core.tables import TableSpec
from airflow_tablemgmt.core.triggers import TriggerStrategy
from airflow_tablemgmt.metadata.table_paths import table_location

log = logging.getLogger(__name__)

#: The execution engines a path-based format's jobs are proven on. Spark Connect would need the format's
#: runtime on the Connect server: not claimed until a test runs it.
ENGINES: tuple[str, ...] = ("spark-submit",)


@dataclass(frozen=True)
class FormatSupport:
    """A format's declaration: its actions with their trigger strategies, the execution engines, and the
    Spark session it needs (a key of ``spark.conf.FORMAT_SESSIONS``: extensions, catalog, jars)."""

    format: TableFormat
    strategies: dict[str, TriggerStrategy]
    engines: tuple[str, ...]
    session: str

    def rows(self) -> list[dict[str, Any]]:
        """One row per action: format, action, trigger, engines (docs/formats.md's table)."""
        return [
            {
                "format": str(self.format),
                "action": action,
                "interval": str(strategy.interval),
                "on_new_snapshot": strategy.on_new_snapshot,
                "parallelism": strategy.parallelism,
                "engines": list(self.engines),
                "session": self.session,
            }
            for action, strategy in sorted(self.strategies.items())
        ]


def path_job(
    table: TableSpec, action: str, options: dict[str, Any], context: TriggerContext, fmt: str
) -> JobSpec:
    """The job of ``action`` on the path-based ``table``: its location in the options, its format on the
    catalog (the job's session is built for that format alone)."""
    catalog = context.catalog
    location = table_location(catalog, table.identifier)
    catalog = catalog.model_copy(update={"properties": {**catalog.properties, TABLE_FORMAT_PROPERTY: fmt}})
    return JobSpec.build(table, catalog, action, {**options, TABLE_LOCATION_OPTION: location})


def location_refusal(table: TableSpec, action: str, context: TriggerContext) -> str | None:
    """Why ``action`` cannot run on ``table`` because its location is missing or holds no table of its
    format, read without a JVM (``metadata/table_check.py``), or None. A location not readable here is
    the job's to read (logged)."""
    from airflow_tablemgmt.metadata.table_check import check_location
    from airflow_tablemgmt.metadata.table_dir import readable_catalog

    check = check_location(readable_catalog(context), table.identifier, str(table.format))
    if check.warning:
        log.info("tablemgmt: %s on %s: %s", action, table.id, check.warning)
    if check.problem is None:
        return None
    return f"{action} on {table.id} declined before any Spark job: {check.problem}"


def retention_changed(
    action: str, option: str, options: dict[str, Any], context: TriggerContext
) -> str | None:
    """Why this run of a destructive ``action`` must be a dry run, or None when it may delete: it may once
    a successful run (a dry run counts: its report is what the user reviews) used the same ``option``."""
    current = options.get(option)
    last = context.last_success
    previous = last.parameters.get("options") if last is not None else None
    if not isinstance(previous, dict):
        return (
            f"first run of {action} with {option} {current or 'the table default'}: dry run; "
            "set confirm: true to delete on the first run"
        )
    if previous.get(option) != current:
        return (
            f"{option} changed from {previous.get(option) or 'the table default'} to "
            f"{current or 'the table default'} since the last successful run: dry run; the next run deletes"
        )
    return None
