"""A planned (policy, action) DAG's settings and schedule (ADR 0004): what building the DAG reads, apart from
the planning itself (``services/plan_runs.py``).

* ``[tablemgmt] plan_measure_budget``, ``plan_max_active_batches``, ``plan_max_active_runs`` and Airflow's
  ``[core] max_map_length``;
* :func:`plan_interval` / :func:`plan_schedule`: how often and on what the DAG runs, which REST and the page
  describe (:func:`describe_plan_schedule`).

A module of its own so that the DAG factory, which builds a planned DAG at every task start, does not import
the planner (stored health, the plan's scoring and their store reads): a task start pays for every module the
DAG file imports (``benchmarks/dag_parse.py``, single-DAG parse). For the same reason an action's default
interval and trigger come from :func:`~airflow_tablemgmt.factories.discovery.factories_for` (this package's
formats when one of them has the action, as :func:`default_factories` would choose, without scanning every
installed distribution for format plugins and importing them).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from airflow_tablemgmt.core.actions import ACTIONS, ActionSettings
from airflow_tablemgmt.core.policies import Policy
from airflow_tablemgmt.core.schedule import SchedulePlan
from airflow_tablemgmt.core.triggers import Interval
from airflow_tablemgmt.services.errors import InvalidInput

#: ``[tablemgmt] plan_measure_budget``: tables measured by one planning task at most.
DEFAULT_MEASURE_BUDGET = 200
#: ``[tablemgmt] plan_max_active_batches``: mapped batches of one (policy, action) DAG running at once.
DEFAULT_MAX_ACTIVE_BATCHES = 4
#: ``[tablemgmt] plan_max_active_runs``: runs of one event-driven (policy, action) DAG at once; Airflow's own
#: default of ``[core] max_active_runs_per_dag``.
DEFAULT_MAX_ACTIVE_RUNS = 16
#: Airflow's own default of ``[core] max_map_length``.
DEFAULT_MAX_MAP_LENGTH = 1024


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


def max_active_runs() -> int:
    """``[tablemgmt] plan_max_active_runs``: the ``max_active_runs`` of a planned DAG whose action runs on its
    tables' new snapshots, so that a run for new events starts while earlier ones are still running (their
    batches share ``plan_max_active_batches`` across runs; each table is run by whoever holds its lease). A
    planned DAG on an interval only keeps one run at a time: a second full plan would plan the same tables."""
    from airflow_tablemgmt.hooks.airflow_settings import setting_or_airflow

    text = setting_or_airflow("tablemgmt", "plan_max_active_runs")
    return _whole("plan_max_active_runs", text, DEFAULT_MAX_ACTIVE_RUNS, 1)


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
    from airflow_tablemgmt.factories.discovery import factories_for

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
    return factories_for(fmt, action).for_action(fmt, action).trigger_strategy(fmt, action).interval


def plan_schedule(policy: Policy, action: str, policies: Iterable[Policy]) -> SchedulePlan:
    """How ``policy``'s planned DAG of ``action`` is scheduled: the action's trigger as the policy's block for it
    (else the first policy naming it, else the action's default) resolves it for a table, on
    :func:`plan_interval`. ``event``: on the snapshots of the policy's tables (their watchers, one asset per
    policy), each table's events at most once per its interval, plus a full plan every ``fallback`` (the
    policy's ``fallback-interval``, else the interval: a full plan also measures the tables that have no
    health yet, so it keeps the interval's cadence); ``schedule``: a full plan every interval."""
    from airflow_tablemgmt.factories.discovery import factories_for

    policies = list(policies)
    interval = plan_interval(policy, action, policies)
    if action in policy.actions:
        source: Policy | None = policy
    else:
        source = next((p for p in policies if action in p.actions and p.formats_for(action)), None)
    fmt = (source or policy).formats_for(action)[0]
    settings = ACTIONS.get(action, fmt).settings((source.actions.get(action) if source else None) or {})
    strategy = factories_for(fmt, action).for_action(fmt, action).trigger_strategy(fmt, action)
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


__all__ = [
    "DEFAULT_MAX_ACTIVE_BATCHES",
    "DEFAULT_MAX_ACTIVE_RUNS",
    "DEFAULT_MAX_MAP_LENGTH",
    "DEFAULT_MEASURE_BUDGET",
    "describe_plan_schedule",
    "max_active_batches",
    "max_active_runs",
    "max_map_length",
    "measure_budget",
    "plan_interval",
    "plan_schedule",
    "policy_action_settings",
]
