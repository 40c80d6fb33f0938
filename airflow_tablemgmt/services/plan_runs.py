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

Reads only; never runs a job.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.actions import ACTIONS, ActionSettings
from airflow_tablemgmt.core.policies import Policy
from airflow_tablemgmt.core.schedule import SchedulePlan
from airflow_tablemgmt.core.triggers import Interval
from airflow_tablemgmt.metadata.planning import Plan, Planned, batches
from airflow_tablemgmt.services.errors import InvalidInput
from airflow_tablemgmt.services.planning import plan_action

if TYPE_CHECKING:
    from airflow_tablemgmt.store import Store

log = logging.getLogger(__name__)

#: ``[tablemgmt] plan_measure_budget``: tables measured by one planning task at most.
DEFAULT_MEASURE_BUDGET = 200
#: ``[tablemgmt] plan_max_active_batches``: mapped batches of one (policy, action) DAG running at once.
DEFAULT_MAX_ACTIVE_BATCHES = 4
#: Airflow's own default of ``[core] max_map_length``.
DEFAULT_MAX_MAP_LENGTH = 1024

#: Measures one table now and stores its reading (raises when it cannot be read).
Measure = Callable[["Store", str], None]


def _whole(option: str, text: str | None, default: int, minimum: int) -> int:
    text = (text or "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise InvalidInput(
            f"[tablemgmt] {option}: {text!r} is not allowed; allowed: a whole number >= {minimum}"
        )
    return value


def measure_budget() -> int:
    """``[tablemgmt] plan_measure_budget`` (0: the planning task measures nothing)."""
    from airflow_tablemgmt.hooks.airflow_settings import setting_or_airflow

    text = setting_or_airflow("tablemgmt", "plan_measure_budget")
    return _whole("plan_measure_budget", text, DEFAULT_MEASURE_BUDGET, 0)


def max_active_batches() -> int:
    """``[tablemgmt] plan_max_active_batches``: the mapped task's ``max_active_tis_per_dag``."""
    from airflow_tablemgmt.hooks.airflow_settings import setting_or_airflow

    text = setting_or_airflow("tablemgmt", "plan_max_active_batches")
    return _whole("plan_max_active_batches", text, DEFAULT_MAX_ACTIVE_BATCHES, 1)


def max_map_length() -> int:
    """``[core] max_map_length``: the most mapped tasks one XCom may make."""
    try:
        from airflow.sdk.configuration import conf

        return max(1, conf.getint("core", "max_map_length", fallback=DEFAULT_MAX_MAP_LENGTH))
    except Exception:  # noqa: BLE001 - no Airflow configuration: Airflow's default
        return DEFAULT_MAX_MAP_LENGTH


def policy_action_settings(policy: Policy, action: str) -> ActionSettings:
    """``policy``'s block for ``action`` as the action's settings (for the first format the policy gives it to)."""
    fmt = policy.formats_for(action)[0]
    return ACTIONS.get(action, fmt).settings(policy.actions.get(action) or {})


def plan_interval(policy: Policy, action: str, policies: Iterable[Policy]) -> Interval:
    """How often ``policy``'s planned DAG of ``action`` runs: the policy's own interval for the action, else
    the shortest of the policies naming it (no table waits longer than its own settings say), else the
    action's default (its factory's strategy for the policy's first format that has it)."""
    from airflow_tablemgmt.factories.discovery import default_factories

    policies = list(policies)
    if action in policy.actions:
        sources = [policy]
    else:
        sources = [p for p in policies if action in p.actions and p.formats_for(action)]
    texts = [policy_action_settings(p, action).interval for p in sources]
    intervals = [Interval.parse(t) for t in texts if t]
    if intervals:
        return min(intervals, key=lambda i: i.min_spacing())
    fmt = policy.formats_for(action)[0]
    return default_factories().for_action(fmt, action).trigger_strategy(fmt, action).interval


def plan_schedule(policy: Policy, action: str, policies: Iterable[Policy]) -> SchedulePlan:
    """How ``policy``'s planned DAG of ``action`` is scheduled: the action's trigger as the policy's block for it
    (else the first policy naming it, else the action's default) resolves it for a table, on
    :func:`plan_interval`. ``event``: on the snapshots of the policy's tables (their watchers, one asset per
    policy), each table's events at most once per its interval, plus a full plan every ``fallback`` (the
    policy's ``fallback-interval``, else the interval: a full plan also measures the tables that have no
    health yet, so it keeps the interval's cadence); ``schedule``: a full plan every interval."""
    from airflow_tablemgmt.factories.discovery import default_factories

    policies = list(policies)
    interval = plan_interval(policy, action, policies)
    if action in policy.actions:
        source: Policy | None = policy
    else:
        source = next((p for p in policies if action in p.actions and p.formats_for(action)), None)
    fmt = (source or policy).formats_for(action)[0]
    settings = ACTIONS.get(action, fmt).settings((source.actions.get(action) if source else None) or {})
    strategy = default_factories().for_action(fmt, action).trigger_strategy(fmt, action)
    resolved = SchedulePlan.resolve(settings, strategy)
    if resolved.trigger == "event":
        # The full plan keeps the interval's cadence (it measures new and stale tables, within the budget),
        # unless the policy names a fallback: events are the fast path beside it, not its replacement.
        fallback = (
            Interval.parse(settings.fallback_interval, "fallback-interval")
            if settings.fallback_interval
            else interval
        )
        return replace(resolved, interval=interval, fallback=fallback)
    return SchedulePlan("schedule", interval, resolved.gate)


def describe_plan_schedule(policy: str, plan: SchedulePlan) -> str:
    """What REST and the page say of a planned DAG's schedule."""
    if plan.trigger == "event":
        return (
            f"planned with policy {policy}'s tables every {plan.fallback} and on their new data snapshots "
            f"(polled every {Interval(every=plan.poll_interval)}, each table at most every {plan.interval}); "
            "run where it pays"
        )
    return f"planned with policy {policy}'s tables every {plan.interval}; run where it pays"


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
    "DEFAULT_MEASURE_BUDGET",
    "PlannedRun",
    "max_active_batches",
    "max_map_length",
    "measure_budget",
    "describe_plan_schedule",
    "plan_interval",
    "plan_run",
    "plan_schedule",
    "policy_action_settings",
]
