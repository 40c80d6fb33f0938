"""The snapshot events a planned DAG's run plans (ADR 0004 decision 5): the events Airflow started the run with,
and the policy's events that arrived after the run's queue row was written, which no run would otherwise take.

How Airflow (3.3) turns a DAG's asset events into runs (``SchedulerJobRunner._create_dag_runs_asset_triggered``):
the first event after the DAG's previous asset-triggered run was created writes the DAG's queue row
(``asset_dag_run_queue``, one per (asset, DAG), insert on conflict do nothing); the scheduler creates a run with
``run_after`` = that row's ``created_at`` and the events in (the previous asset-triggered run's ``run_after``,
``run_after``], and deletes the row. An event that arrives between the row's write and the run's creation finds the
row there (its insert is a no-op) and is newer than the run's ``run_after``: it is in no run until the DAG's next
event writes a new row (whose run's window then starts at this run's ``run_after``), or it waits for the full plan
on the fallback interval, which plans from stored health and may not plan the table at all. The policy asset
carries every enrolled table's events, so that gap is common (three of six commits in
``benchmarks/event_latency_fleet.py``), and it lasts as long as the run's creation waits (a run active at
``max_active_runs``). Reported upstream as apache/airflow#56050; Airflow after 3.3 makes the queue row reference
its events (apache/airflow#70972), and then this read finds nothing left over.

So the ``plan`` task of an asset-triggered run also reads the policy asset's events since its ``run_after``
(``inlet_events``' reader, the execution API's ``asset-events/by-asset``) and plans the tables of those that no run
of its DAG consumed (an event's ``created_dagruns``): the gap's events, and any still waiting for a queue row's
run. Every event is then planned by the run that consumed it or by the run whose gap it fell into; an event may be
planned by two runs (this one, and the next run whose window holds it), which measure the table twice; its job
runs once (the table's lease, and the health and snapshot gates right before the job). A full plan (the fallback
interval) and a manual run read no events.

A read that fails (after the Task SDK's own retries) fails the ``plan`` task, which Airflow retries: its tables are
planned late, never dropped. Airflow 3.3's execution API answers 500 while an event in the window was consumed by
a run that has not started yet (``start_date`` still NULL: apache/airflow#71360); such a run starts within a
scheduler loop, which the SDK's retries outlast.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from airflow_tablemgmt.dag_factory.assets import policy_asset_name, tables_of_events

log = logging.getLogger(__name__)

#: Reads an asset's events at or after a time, oldest first: (asset name, after) -> events.
ReadEvents = Callable[[str, datetime], Sequence[Any]]

ASSET_TRIGGERED = "asset_triggered"


@dataclass
class RunEvents:
    """The tables a run's events ask the action for (None: a run without events, a full plan) and the late events
    it took (their ids and tables), for the plan's XCom."""

    changed: list[str] | None
    late_events: list[int] = field(default_factory=list)
    late_tables: list[str] = field(default_factory=list)
    read_at: str | None = None  # when the events after the queue row were read (UTC, ISO 8601)


def read_asset_events(name: str, after: datetime) -> Sequence[Any]:
    """The asset's events at or after ``after`` through the Task SDK (the reader behind ``inlet_events``). The
    policy asset is not made an inlet of the task: Airflow's DAG processor keeps one definition per asset, the
    tasks' inlets read after the schedule's, so a watcher-less inlet copy would drop the policy's watchers."""
    from airflow.sdk.execution_time.context import InletEventsAccessor

    return list(InletEventsAccessor(asset_name=name).after(after.isoformat()))


def run_events(
    context: Mapping[str, Any], policy: str, action: str, read: ReadEvents | None = None
) -> RunEvents:
    """What ``context``'s run plans of the policy's events (see the module docstring)."""
    triggering = context.get("triggering_asset_events")
    changed = tables_of_events(triggering, action) if triggering else None
    dag_run = context.get("dag_run")
    run_type = getattr(dag_run, "run_type", None)
    run_after = getattr(dag_run, "run_after", None)
    if str(getattr(run_type, "value", run_type)) != ASSET_TRIGGERED or run_after is None:
        return RunEvents(changed)
    dag_id = getattr(dag_run, "dag_id", None)
    events = (read or read_asset_events)(policy_asset_name(policy), run_after)
    read_at = datetime.now(UTC).isoformat()
    late = [e for e in events if not _consumed_by(e, dag_id)]
    tables = tables_of_events({"late": late}, action) if late else None
    if tables is None:
        return RunEvents(changed)
    taken = sorted(set(tables) - set(changed or ()))
    if taken:
        log.info(
            "tablemgmt: %d event(s) of policy %s after this run's queue row, in no run of this DAG: planned here "
            "too: %s",
            len(late),
            policy,
            taken[:20],
        )
    return RunEvents(
        sorted(set(changed or ()) | set(tables)),
        late_events=[int(i) for e in late if (i := getattr(e, "id", None)) is not None],
        late_tables=taken,
        read_at=read_at,
    )


def _consumed_by(event: Any, dag_id: str | None) -> bool:
    """Whether a run of ``dag_id`` consumed ``event`` (this run's own triggering events among them): that run
    plans it. Runs of the policy's other actions' DAGs do not count."""
    runs: Iterable[Any] = getattr(event, "created_dagruns", None) or ()
    return any(getattr(r, "dag_id", None) == dag_id for r in runs) if dag_id is not None else False


__all__ = ["RunEvents", "read_asset_events", "run_events"]
