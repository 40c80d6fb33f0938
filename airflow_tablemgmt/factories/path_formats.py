"""What path-based formats' factories share: the check of a table's location before any job, and the
first-run dry-run policy of a destructive action whose retention changed."""

from __future__ import annotations

import logging
from typing import Any

from airflow_tablemgmt.core.factory import TriggerContext
from airflow_tablemgmt.core.tables import TableSpec

log = logging.getLogger(__name__)


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
