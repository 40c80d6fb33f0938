"""How long one run of an action may take: the task's ``execution_timeout``, the job's wall clock and the
DAG run's ``dagrun_timeout``, as plain values (``dag_factory`` renders them into Airflow objects).

A refresh runs user SQL, which can be made to run for days (``SELECT ... FROM range(10^12)``); with a
short freshness the DAG would keep such a run going for ever, holding a worker slot and the cluster's
cores. So every refresh (and a creation, which is a refresh) has a limit:

- the table's own ``timeout`` (its definition: tables.yaml, REST, ``tablemgmt dt create|alter --timeout``),
  else ``[tablemgmt] refresh_timeout``, else the freshness period (``downstream``: one hour);
- never above ``[tablemgmt] refresh_timeout_max`` (default 6 hours): a larger value is capped, and the
  limit's source says so.

Maintenance actions have one too: the action's ``timeout`` option, else ``[tablemgmt]
maintenance_timeout`` (default 4 hours). The limit travels to a refresh job as ``timeout_seconds`` in
its options, so the driver cancels its Spark jobs at the same wall clock; when Airflow's timeout fires
first the operator kills the job and the process ends FAILED with :meth:`TimeLimit.reason`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from airflow_tablemgmt.core.durations import format_duration

REFRESH_TIMEOUT_MAX = timedelta(hours=6)
DOWNSTREAM_REFRESH_TIMEOUT = timedelta(hours=1)
MAINTENANCE_TIMEOUT = timedelta(hours=4)
#: A DAG run may also wait for the table's lease and between retries; this much more is slack.
DAGRUN_SLACK = timedelta(minutes=5)


@dataclass(frozen=True)
class TimeLimit:
    """A run's limit and where it came from (for the task's docs and the failure reason)."""

    limit: timedelta
    source: str

    @property
    def seconds(self) -> int:
        return max(1, int(self.limit.total_seconds()))

    def reason(self, action: str) -> str:
        """The process's failure reason when the limit passed."""
        return (
            f"timed out: {action} ran past its time limit of {format_duration(self.limit)} ({self.source}); "
            "its Spark job was stopped"
        )


def refresh_time_limit(
    freshness_period: timedelta | None,
    override: timedelta | None = None,
    setting: timedelta | None = None,
    cap: timedelta = REFRESH_TIMEOUT_MAX,
) -> TimeLimit:
    """A refresh's limit. ``freshness_period``: None (or zero) for ``freshness: downstream``."""
    if override is not None:
        limit, source = override, f"the table's timeout {format_duration(override)}"
    elif setting is not None:
        limit, source = setting, f"[tablemgmt] refresh_timeout {format_duration(setting)}"
    elif freshness_period:
        limit, source = freshness_period, f"its freshness period {format_duration(freshness_period)}"
    else:
        limit, source = DOWNSTREAM_REFRESH_TIMEOUT, "the default for freshness downstream"
    if limit > cap:
        return TimeLimit(cap, f"{source}, capped by [tablemgmt] refresh_timeout_max {format_duration(cap)}")
    return TimeLimit(limit, source)


def maintenance_time_limit(override: timedelta | None = None, setting: timedelta | None = None) -> TimeLimit:
    """A maintenance action's limit: its ``timeout`` option, else the setting, else 4 hours."""
    if override is not None:
        return TimeLimit(override, f"the action's timeout {format_duration(override)}")
    if setting is not None:
        return TimeLimit(setting, f"[tablemgmt] maintenance_timeout {format_duration(setting)}")
    return TimeLimit(
        MAINTENANCE_TIMEOUT, f"the default maintenance timeout {format_duration(MAINTENANCE_TIMEOUT)}"
    )


def dagrun_timeout(
    limit: timedelta, retries: int, retry_delay: timedelta, lease_wait: timedelta
) -> timedelta:
    """The DAG run's bound, consistent with its one task's: every try at its limit, the delays between
    tries, one full wait for the table's lease, and :data:`DAGRUN_SLACK`. Reached only when something
    outside the task's own limit holds the run (a task that never started, a lost worker)."""
    return (retries + 1) * limit + retries * retry_delay + lease_wait + DAGRUN_SLACK
