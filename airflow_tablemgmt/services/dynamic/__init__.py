"""Dynamic-table operations (FLIP-435 on Airflow): create, get, list, history, suspend, resume, alter,
drop, refresh. The CLI (``tablemgmt dt ...``) and the REST API call these same functions, so both
validate and answer identically.

By concern: :mod:`.views` (views, reads, shared checks), :mod:`.changes` (declare, suspend, resume,
alter, drop), :mod:`.refresh` (REST and CLI refreshes), :mod:`.create` (creating here or queued on a
worker). This face re-exports what the CLI and the API call (``dynamic.<fn>(...)``).
"""

from __future__ import annotations

from airflow_tablemgmt.core.dynamic.refresh import REFRESH, SCHEDULE_TIME_FORMAT
from airflow_tablemgmt.services.dynamic.changes import alter, declare, drop, resume, suspend
from airflow_tablemgmt.services.dynamic.create import abandon, create, queue_creation
from airflow_tablemgmt.services.dynamic.refresh import (
    PERIODIC_NEEDS_SCHEDULE_TIME,
    check_not_suspended,
    check_refresh,
    check_schedule_time,
    refresh,
    refresh_now,
    refresh_parameters,
)
from airflow_tablemgmt.services.dynamic.views import (
    AlterResult,
    DagPauser,
    DynamicTableView,
    RefreshDagTrigger,
    RefreshRequested,
    check_upstreams,
    format_schedule_time,
    get,
    history,
    history_row,
    list_,
    parse_definition,
    parse_schedule_time,
    refresh_mode_view,
)

__all__ = [
    "PERIODIC_NEEDS_SCHEDULE_TIME",
    "REFRESH",
    "SCHEDULE_TIME_FORMAT",
    "AlterResult",
    "DagPauser",
    "DynamicTableView",
    "RefreshDagTrigger",
    "RefreshRequested",
    "abandon",
    "alter",
    "check_not_suspended",
    "check_refresh",
    "check_schedule_time",
    "check_upstreams",
    "create",
    "declare",
    "drop",
    "format_schedule_time",
    "get",
    "history",
    "history_row",
    "list_",
    "parse_definition",
    "parse_schedule_time",
    "queue_creation",
    "refresh",
    "refresh_now",
    "refresh_mode_view",
    "refresh_parameters",
    "resume",
    "suspend",
]
