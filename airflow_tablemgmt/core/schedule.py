"""How one (table, action) is scheduled: a pure plan, resolved from its settings and its factory's
strategy. The DAG factory renders it (timetables, assets); the REST API describes it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from airflow_tablemgmt.core.actions import ActionSettings
from airflow_tablemgmt.core.triggers import Interval, TriggerStrategy

FALLBACK_INTERVAL = Interval(every=timedelta(days=1))


@dataclass(frozen=True)
class SchedulePlan:
    """How one (table, action) is scheduled, resolved from its settings and its factory's strategy.

    * ``schedule``: the DAG runs every ``interval``; with ``gate`` the ``maintain`` task first skips
      the run when the table has no new snapshot.
    * ``event``: an asset watcher in the triggerer polls the snapshot every ``poll_interval`` and
      starts a run for a new data-changing snapshot, at most once per ``interval``; beside it a
      time-based run every ``fallback`` (catches what a stopped triggerer missed). The gate is on.
    * ``upstream`` (a dynamic table's ``freshness: downstream``): a run after each successful
      refresh of any of its upstream dynamic tables (their refresh assets,
      :func:`airflow_tablemgmt.dag_factory.assets.refresh_asset`).

    Default: ``event`` for snapshot-driven actions, because a watcher poll costs a small fraction
    of a scheduled run's check (a task start) (``benchmarks/gate_cost.py`` measures both; figures in
    ``benchmarks/README.md``), ``schedule`` for the others.
    """

    trigger: str
    interval: Interval
    gate: bool
    fallback: Interval | None = None
    poll_interval: timedelta = timedelta(seconds=1)

    @classmethod
    def resolve(cls, settings: ActionSettings, strategy: TriggerStrategy) -> SchedulePlan:
        interval = Interval.parse(settings.interval) if settings.interval else strategy.interval
        if settings.trigger == "upstream":
            return cls("upstream", interval, False)
        gate = strategy.on_new_snapshot if settings.on_new_snapshot is None else settings.on_new_snapshot
        trigger = settings.trigger or ("event" if gate else "schedule")
        if trigger == "schedule":
            return cls("schedule", interval, gate)
        if settings.fallback_interval:
            fallback = Interval.parse(settings.fallback_interval, "fallback-interval")
        elif interval.min_spacing() >= FALLBACK_INTERVAL.min_spacing():
            fallback = interval
        else:
            fallback = FALLBACK_INTERVAL
        return cls("event", interval, True, fallback, settings.poll_interval)

    def describe(self) -> str:
        if self.trigger == "upstream":
            return "after each successful refresh of an upstream dynamic table"
        if self.trigger == "schedule":
            return f"every {self.interval}" + (", when the table has a new snapshot" if self.gate else "")
        return (
            f"on new data snapshots (polled every {Interval(every=self.poll_interval)}), "
            f"at most every {self.interval}; fallback run every {self.fallback}"
        )
