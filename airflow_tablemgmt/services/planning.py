"""Plan one (policy, action) (ADR 0004's planning step): the store's one read of the policy's enrolled tables
and their stored health (``store/planning.py``), decided by ``metadata/planning.py`` with the gate's own
decision, cut into batches. Reads, never runs: no JVM, no catalog call.

Two settings, ``[tablemgmt]`` in Airflow's configuration (``provider_config.py``):

* ``plan_batch_size`` (default 50): tables per mapped task;
* ``plan_health_max_age`` (default ``1d``): stored health older than this is measured again before the
  table is planned.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import timedelta
from typing import TYPE_CHECKING

from airflow_tablemgmt.core.durations import to_timedelta
from airflow_tablemgmt.metadata.planning import DEFAULT_BATCH_SIZE, DEFAULT_HEALTH_MAX_AGE, Plan, plan
from airflow_tablemgmt.services.errors import InvalidInput
from airflow_tablemgmt.store.planning import EnrolledHealth, PlanningRepository

if TYPE_CHECKING:
    from airflow_tablemgmt.store import Store

#: Up to this many named tables are read by id (an ``IN`` list); more: the policy's rows, filtered here.
ONLY_IN_QUERY = 1000


def plan_settings() -> tuple[int, timedelta]:
    """``[tablemgmt] plan_batch_size`` and ``plan_health_max_age``, their defaults when unset; a bad value
    raises :class:`InvalidInput` naming the option, the value and what is allowed."""
    from airflow_tablemgmt.hooks.airflow_settings import setting_or_airflow

    size_text = (setting_or_airflow("tablemgmt", "plan_batch_size") or "").strip()
    age_text = (setting_or_airflow("tablemgmt", "plan_health_max_age") or "").strip()
    size = DEFAULT_BATCH_SIZE
    if size_text:
        try:
            size = int(size_text)
        except ValueError:
            size = 0
        if size < 1:
            raise InvalidInput(
                f"[tablemgmt] plan_batch_size: {size_text!r} is not allowed; allowed: a whole number >= 1"
            )
    age = DEFAULT_HEALTH_MAX_AGE
    if age_text:
        try:
            age = to_timedelta(age_text)
        except ValueError as e:
            raise InvalidInput(f"[tablemgmt] plan_health_max_age: {e}") from None
    return size, age


def plan_action(
    store: Store,
    policy: str,
    action: str,
    *,
    batch_size: int | None = None,
    max_age: timedelta | None = None,
    only: Collection[str] | None = None,
) -> Plan:
    """The plan of ``action`` over the tables ``policy`` enrolled (``metadata.planning.Plan``). Unset
    ``batch_size`` / ``max_age``: the settings above. Ages are judged by the database's clock, which stamped
    the health rows. ``only``: plan just these of the policy's tables (a run naming its tables, the tables
    measured just now); the others are left out of the plan."""
    if batch_size is None or max_age is None:
        size, age = plan_settings()
        batch_size = size if batch_size is None else batch_size
        max_age = age if max_age is None else max_age
    repo = PlanningRepository.of(store)
    rows: Iterable[EnrolledHealth]
    if only is not None and len(only) <= ONLY_IN_QUERY:  # a few tables: just their rows
        rows = repo.rows(policy, only)
    else:
        rows = repo.rows(policy)
        if only is not None:
            wanted = set(only)
            rows = (r for r in rows if r.table_id in wanted)
    return plan(rows, action, now=store.processes.now(), max_age=max_age, batch_size=batch_size)


__all__ = ["plan_action", "plan_settings"]
