"""The distributed test deployment's ``airflow_local_settings.py`` (copied to ``$AIRFLOW_HOME/config/``).

An Airflow cluster policy: every TableMaintenanceOperator of this deployment heartbeats, goes stale,
holds its lease and polls for a held lease on a shorter clock than the product defaults
(``airflow_tablemgmt.lifecycle``: heartbeat 20 s, stale after 90 s, lease TTL 2 min; lease poll 30 s),
so that a scenario waiting out a killed worker's lease takes seconds instead of minutes. The
relations the defaults keep hold here too: heartbeat < stale-after < lease TTL.

Airflow applies ``task_policy`` to every task of every DAG it parses, in the dag-processor and in each
task process (the Task SDK parses the DAG file before it runs a task), so the operator that runs has
these values. Nothing here is imported by the test process.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

__all__ = ["task_policy"]  # what Airflow takes from this module (it copies every other public name)

HEARTBEAT_EVERY = timedelta(seconds=5)
STALE_AFTER = timedelta(seconds=20)
LEASE_TTL = timedelta(seconds=30)
LEASE_POLL = timedelta(seconds=5)


def task_policy(task: Any) -> None:
    if type(task).__name__ != "TableMaintenanceOperator":
        return
    task.heartbeat_every = HEARTBEAT_EVERY
    task.stale_after = STALE_AFTER
    task.lease_ttl = LEASE_TTL
    task.lease_poll = LEASE_POLL
