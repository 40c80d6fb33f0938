"""The planning task of a policy's (policy, action) DAG run (ADR 0004, decision 2): the plan of
``services/planning.py``, plus what a run needs around it.

* **Measured first.** Tables the plan cannot decide from stored health (none yet, older than
  ``plan_health_max_age``, measured with other settings) are measured now, without a JVM (the table's
  metadata, ``services/health.py``, which also stores the reading), up to ``[tablemgmt]
  plan_measure_budget`` tables a run (default 200, in the plan's order), and planned with their fresh figures in
  the same run; the rest wait for the next run. Without this a newly enrolled table would never be planned.
* **A run may name its tables** (``conf: {"tables": [...]}``, a run-now of enrolled tables): those of them the
  policy enrolled with the action enabled are run whatever their stored health says, as a run-now of a
  declared table runs; the health gate, reading each table right before its job, still decides.
* **A run started by snapshot events** (an event-driven action, ADR 0004 decision 5) plans the tables its
  events name (``changed``): those the policy enrolled with the action enabled are measured now (their stored
  figures predate the commit that moved them), within the same budget, and planned from the fresh figures;
  one the budget did not reach or that could not be measured is run anyway, its health gate deciding right
  before its job, so a commit is never lost to a stale reading. The policy's other tables wait for a
  scheduled run.
* **At most** ``[core] max_map_length`` **batches** (Airflow fails a task whose XCom maps to more): the
  worst-scored tables go first, the rest are left for the next run and counted (``left_over``).

Reads only; never runs a job. The DAG's settings and schedule, which building the DAG reads at every task
start, are in ``services/plan_settings.py`` (re-exported here).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.metadata.planning import Plan, Planned, batches
from airflow_tablemgmt.services.plan_settings import (
    DEFAULT_MAX_ACTIVE_BATCHES,
    DEFAULT_MAX_ACTIVE_RUNS,
    DEFAULT_MAX_MAP_LENGTH,
    DEFAULT_MEASURE_BUDGET,
    describe_plan_schedule,
    max_active_batches,
    max_active_runs,
    max_map_length,
    measure_budget,
    plan_interval,
    plan_schedule,
    policy_action_settings,
)
from airflow_tablemgmt.services.planning import plan_action

if TYPE_CHECKING:
    from airflow_tablemgmt.store import Store

log = logging.getLogger(__name__)

#: Measures one table now and stores its reading (raises when it cannot be read).
Measure = Callable[["Store", str], None]


def _measure(store: Store, table_id: str) -> None:
    from airflow_tablemgmt.services.health import table_health

    health = table_health(store, table_id, ttl=0)
    if health.error is not None:
        raise RuntimeError(health.error)


@dataclass
class PlannedRun:
    """What the planning task decided: the batches to map over and what a person should see of the rest."""

    plan: Plan
    batches: list[list[str]]
    measured: list[str] = field(default_factory=list)
    unmeasured: dict[str, str] = field(default_factory=dict)  # table -> why it could not be measured
    left_over: int = 0  # pay-worthy tables beyond max_map_length batches: the next run takes them
    not_found: list[str] = field(default_factory=list)  # named tables this policy did not enrol
    changed: list[str] | None = None  # an event-started run: the tables its events named

    def to_dict(self, sample: int = 20) -> dict[str, Any]:
        """The task's XCom of the plan (not the batches, which the mapped task gets): counts and a few of
        each kind with their reasons."""
        p = self.plan
        return {
            "action": p.action,
            "counts": {
                **p.counts(),
                "batches": len(self.batches),
                "measured": len(self.measured),
                "left_over": self.left_over,
            },
            "pays": [{"table": t.table_id, "score": t.score, "reason": t.reason} for t in p.pays[:sample]],
            "measure": dict(list(p.measure.items())[:sample]),
            "idle": dict(list(p.idle.items())[:sample]),
            "not_enabled": dict(list(p.not_enabled.items())[:sample]),
            "unmeasured": dict(list(self.unmeasured.items())[:sample]),
            "not_found": self.not_found[:sample],
            **({"changed": self.changed[:sample]} if self.changed is not None else {}),
        }


def plan_run(
    store: Store,
    policy: str,
    action: str,
    *,
    tables: Sequence[str] | None = None,
    changed: Sequence[str] | None = None,
    budget: int | None = None,
    max_batches: int | None = None,
    measure: Measure = _measure,
) -> PlannedRun:
    """Plan one run of (``policy``, ``action``) (see the module docstring). ``tables``: only these (a run's
    ``conf``, which wins over ``changed``); ``changed``: the tables a run's snapshot events named;
    ``budget``/``max_batches``: unset, the settings."""
    budget = measure_budget() if budget is None else budget
    max_batches = max_map_length() if max_batches is None else max_batches
    only = list(dict.fromkeys(tables)) if tables is not None else None
    events = sorted(set(changed)) if changed is not None and only is None else None
    if events == []:  # events, none for this action (the watcher throttles each action on its own)
        return PlannedRun(Plan(action), [], changed=[])
    first = plan_action(store, policy, action, only=only if only is not None else events)
    if only is not None:
        return _named(first, only)
    if events is not None:  # every named table's stored figures are stale: measure them all first
        enabled = {p.table_id for p in first.pays} | set(first.measure) | set(first.idle)
        stale = [t for t in events if t in enabled]
        first.measure = {t: "changed: a new snapshot since its health was read" for t in stale}
        first.pays, first.idle = [], {}
    measured: list[str] = []
    unmeasured: dict[str, str] = {}
    for table_id in list(first.measure)[:budget]:
        try:
            measure(store, table_id)
            measured.append(table_id)
        except Exception as e:  # noqa: BLE001 - an unreadable table waits; the others are planned
            unmeasured[table_id] = f"{type(e).__name__}: {e}"
    final = first
    if measured:
        again = plan_action(store, policy, action, batch_size=first.batch_size, only=measured)
        final = _merged(first, again)
    cap = max_batches * final.batch_size
    pays = final.pays if len(final.pays) <= cap else _longest_waiting_first(store, action, final.pays)
    ids = [t.table_id for t in pays]
    if events is not None:  # not decided from fresh figures: run, the health gate decides before the job
        ids += [t for t in first.measure if t not in measured or t in final.measure]
    cut = ids[:cap]
    planned = PlannedRun(final, batches(cut, final.batch_size), measured, unmeasured, len(ids) - len(cut))
    if events is not None:
        planned.changed = events
        planned.not_found = [t for t in events if t not in first.measure and t not in first.not_enabled]
    if planned.left_over:
        log.warning(
            "tablemgmt: %s of policy %s: %d table(s) beyond %d batches ([core] max_map_length) are left for the "
            "next run",
            action,
            policy,
            planned.left_over,
            max_batches,
        )
    return planned


def _longest_waiting_first(store: Store, action: str, pays: list[Planned]) -> list[Planned]:
    """``pays`` (worst score first) with equal scores ordered by their newest ``action`` process, never run
    first, then the oldest: when a run cannot take every table that pays (``max_map_length``), the ones it
    left are first in the next run's cut instead of losing to the same table ids every time (every table
    of an action without thresholds scores 100)."""
    from airflow_tablemgmt.store.plan_skips import PlanSkipRepository

    last = PlanSkipRepository.of(store).last_instants(action, [p.table_id for p in pays])
    never = datetime.min.replace(tzinfo=UTC)
    return sorted(pays, key=lambda p: (p.score, last.get(p.table_id, never), p.table_id))


def _named(plan: Plan, named: list[str]) -> PlannedRun:
    """A run naming its tables: each the policy enrolled with the action enabled, in the order named."""
    enabled = {p.table_id for p in plan.pays} | set(plan.measure) | set(plan.idle)
    runs = [t for t in named if t in enabled]
    known = enabled | set(plan.not_enabled)
    return PlannedRun(plan, batches(runs, plan.batch_size), not_found=[t for t in named if t not in known])


def _merged(first: Plan, again: Plan) -> Plan:
    """``first`` with the tables measured just now decided by ``again`` (their stale reasons dropped)."""
    out = Plan(first.action, batch_size=first.batch_size)
    redone = {p.table_id for p in again.pays} | set(again.measure) | set(again.idle) | set(again.not_enabled)
    out.pays = sorted(
        [p for p in first.pays if p.table_id not in redone] + again.pays, key=lambda p: (p.score, p.table_id)
    )
    out.measure = {**{k: v for k, v in first.measure.items() if k not in redone}, **again.measure}
    out.idle = {**first.idle, **again.idle}
    out.not_enabled = {**first.not_enabled, **again.not_enabled}
    return out


__all__ = [
    "DEFAULT_MAX_ACTIVE_BATCHES",
    "DEFAULT_MAX_ACTIVE_RUNS",
    "DEFAULT_MAX_MAP_LENGTH",
    "DEFAULT_MEASURE_BUDGET",
    "PlannedRun",
    "max_active_batches",
    "max_active_runs",
    "max_map_length",
    "measure_budget",
    "describe_plan_schedule",
    "plan_interval",
    "plan_run",
    "plan_schedule",
    "policy_action_settings",
]
