"""Policies -> planned DAGs: one per (policy, action), ``tms__plan__<policy>__<action>`` (ADR 0004).

A table a policy enrolled has no DAG of its own: 100,000 enrolled tables × 7 actions would be 700,000 DAGs,
most with nothing to do on a given day. Instead each (policy, action) has one DAG, on the action's interval,
of two tasks:

* ``plan`` reads the policy's enrolled tables and their stored health without a JVM, measures the ones it
  cannot decide yet (within a budget), and returns the tables where the action pays, in batches of
  ``[tablemgmt] plan_batch_size`` (``services/plan_runs.py``);
* ``run_batch``, mapped over those batches with Airflow's dynamic task mapping
  (``RunBatchOperator.partial(...).expand(batch=plan)``), runs each batch's tables one after another, each through
  the lifecycle with its own lease and process row (``services/batches.py``); at most ``[tablemgmt]
  plan_max_active_batches`` batches of the DAG run at once (``max_active_tis_per_dag``). A run with nothing
  to do maps zero batches: Airflow marks ``run_batch`` skipped.

Which actions: every action a policy gives that this policy's formats support, not only the policy's own: a
table is enrolled by its most specific policy and may take an action from a less specific one that also
matches it (``core/policies.py``). The interval: the policy's own for the action, else the shortest of the
policies that name it, else the action's default.

**Events** (ADR 0004 decision 5). An action that runs on new snapshots (``trigger: event``, the default of the
snapshot-gated actions) is scheduled on the policy's asset (:func:`~airflow_tablemgmt.dag_factory.assets.policy_asset`:
each enrolled table's own watcher, the shared per-catalog poll, each table's events at most once per its
interval) and, for a full plan, on the interval (or the policy's ``fallback-interval``). A run its events
started plans the tables they name for its action, and those of the policy's events after its queue row that
no run took (``plan_events.py``); its runs overlap, up to ``[tablemgmt] plan_max_active_runs``
(``services/plan_runs.py``). The full parse builds the watchers from the table rows it has read already
(:func:`policy_watched`, no read of its own); a task start, which needs no schedule, carries the asset by name
only, so it reads no table row (a task's DAG is never serialized: the DAG processor's full parse is the one
the scheduler and triggerer use).

Declared tables keep their DAGs (``dag_factory/build.py``). Few DAGs (policies × actions): built on every
parse, never cached; a task start builds only its own.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import DAG, Asset, AssetOrTimeSchedule, BaseOperator

from airflow_tablemgmt.core.naming import plan_dag_id
from airflow_tablemgmt.core.policies import Policy
from airflow_tablemgmt.core.schedule import SchedulePlan
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.dag_factory.assets import event_plans, policy_asset, policy_asset_name
from airflow_tablemgmt.dag_factory.timetables import START_DATE
from airflow_tablemgmt.dag_factory.timetables import timetable as _timetable

if TYPE_CHECKING:
    from airflow_tablemgmt.dag_factory.plan_events import ReadEvents
    from airflow_tablemgmt.factories.discovery import FactoryRegistry
    from airflow_tablemgmt.store.tables import RegisteredTable

#: Per policy, its enrolled tables with event-driven actions: (table, its catalog, :func:`event_plans`).
Watched = Mapping[str, list[tuple[TableSpec, CatalogSpec, dict[str, SchedulePlan]]]]

log = logging.getLogger(__name__)

PLAN_TASK = "plan"
BATCH_TASK = "run_batch"


class PlanOperator(BaseOperator):
    """The ``plan`` task: the batches to map over (its XCom ``return_value``, which ``run_batch`` expands); the
    plan's counts and samples go to the log and to the XCom key ``plan`` (:func:`plan_in_context`).

    An operator of its own rather than a ``@task`` function: the decorator imports Airflow's Python operators
    (and ``packaging``'s requirement parser with them), which every start of this DAG's tasks would pay for
    in its parse (``benchmarks/dag_parse.py``, single-DAG parse), for a task that needs none of them."""

    template_fields: Sequence[str] = ()
    ui_color = "#fcf3cf"

    def __init__(self, *, policy: str, action: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.policy = policy
        self.action = action

    def execute(self, context: Any) -> list[list[str]]:
        from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook

        return plan_in_context(TableMgmtHook().get_store(), context, self.policy, self.action)


def plan_in_context(
    store: Any, context: Any, policy: str, action: str, read_events: ReadEvents | None = None
) -> list[list[str]]:
    """Plan the run of ``context``: a run's ``conf`` may name its tables (``{"tables": [...]}``); a run started
    by snapshot events plans the tables they name for ``action`` (``triggering_asset_events``) and those of the
    policy's events after its queue row that no run of the DAG took (:func:`~.plan_events.run_events`, read by
    ``read_events``, unset: the Task SDK); any other run plans every table of the policy."""
    from airflow_tablemgmt.dag_factory.plan_events import run_events
    from airflow_tablemgmt.services.plan_runs import plan_run

    conf = getattr(context.get("dag_run"), "conf", None) or {}
    named = conf.get("tables")
    if named is not None and (not isinstance(named, list) or not all(isinstance(t, str) for t in named)):
        raise ValueError(f"conf.tables: {named!r} is not allowed; allowed: a list of table ids")
    events = run_events(context, policy, action, read_events) if named is None else None
    planned = plan_run(store, policy, action, tables=named, changed=events.changed if events else None)
    summary = planned.to_dict()
    summary["counts"]["skips_recorded"] = _record_skips(store, context, policy, planned)
    if events is not None and events.late_events:  # which events this run took beyond Airflow's
        summary["counts"]["late_events"] = len(events.late_events)
        summary["late_events"], summary["late_tables"] = events.late_events[:1000], events.late_tables[:20]
        summary["late_read_at"] = events.read_at
    log.info("tablemgmt: plan of %s for policy %s: %s", action, policy, summary["counts"])
    kinds = ("changed", "late_tables", "pays", "measure", "idle", "not_enabled", "unmeasured", "not_found")
    for kind in kinds:
        if summary.get(kind):
            log.info("tablemgmt:   %s (first %d): %s", kind, len(summary[kind]), summary[kind])
    context["ti"].xcom_push(key="plan", value=summary)
    return planned.batches


def _record_skips(store: Any, context: Any, policy: str, planned: Any) -> int:
    """The skipped processes of the tables this run left out whose reason changed (``services/plan_skips.py``);
    how many were written. Never fails the plan: the batches run whatever the history says."""
    from airflow_tablemgmt.operators.maintenance import run_instant
    from airflow_tablemgmt.services.plan_skips import record_skips

    ti = context["ti"]
    try:
        done = record_skips(
            store,
            policy,
            planned,
            instant=run_instant(context),
            dag_id=getattr(ti, "dag_id", None),
            run_id=getattr(ti, "run_id", None),
            task_id=getattr(ti, "task_id", None) or PLAN_TASK,
        )
    except Exception:  # noqa: BLE001 - the history's note, not the plan
        log.exception("tablemgmt: the skipped processes of this plan could not be recorded")
        return 0
    if done.deferred:
        log.info("tablemgmt: %d skipped process(es) left for the next plan", done.deferred)
    return done.written


class RunBatchOperator(BaseOperator):
    """A mapped ``run_batch`` task: ``batch``'s tables one after another (``services/batches.py``). Fails at
    the end, naming them, when a table failed; the others ran. An operator rather than a decorated function
    for :meth:`on_kill`: a batch killed by Airflow (marked failed, a timeout) kills the job of the table it
    is running and records that process KILLED, as a table's own task does."""

    template_fields: Sequence[str] = ()
    ui_color = "#d6eaf8"
    _runner: Any = None  # the running table's ProcessRunner, for on_kill

    def __init__(self, *, batch: list[str], policy: str, action: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.batch = batch
        self.policy = policy
        self.action = action

    def execute(self, context: Any) -> dict[str, Any]:
        from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook
        from airflow_tablemgmt.operators.maintenance import run_instant
        from airflow_tablemgmt.services import batch_wiring as wiring
        from airflow_tablemgmt.services.batches import BatchRun, run_batch

        ti = context["ti"]
        context["batch_label"] = batch_label(self.batch)  # the grid's name of this batch (map_index_template)
        store = TableMgmtHook().get_store()
        run = BatchRun(
            policy=self.policy,
            action=self.action,
            instant=run_instant(context),
            dag_id=ti.dag_id,
            run_id=ti.run_id,
            task_id=ti.task_id,
            map_index=ti.map_index,
            try_number=ti.try_number,
            last_try=ti.try_number is None or ti.try_number > (self.retries or 0),
        )
        wiring.reap(store)
        make = wiring.runner_for(store, self.action, context)

        def runner_for(table_id: str) -> Any:
            self._runner = make(table_id)
            return self._runner

        try:
            result = run_batch(
                store,
                run,
                self.batch,
                runner_for=runner_for,
                snapshot_gate=wiring.snapshot_gate,
                limit_for=wiring.time_limit_for(store, self.action),
                after_table=wiring.after_table(context),
            )
        finally:
            self._runner = None
            make.close()  # the batch's shared spark-submit driver, if one ran, ends
        log.info(
            "tablemgmt: batch %s of %s (policy %s): %s",
            ti.map_index,
            self.action,
            self.policy,
            result.counts(),
        )
        result.raise_if_failed()
        return result.to_dict()

    def on_kill(self) -> None:
        if self._runner is not None:
            self._runner.kill()


def batch_label(batch: Sequence[str]) -> str:
    """What the grid shows for a mapped batch: its first table and how many."""
    if not batch:
        return "(empty)"
    return f"{batch[0]} +{len(batch) - 1}" if len(batch) > 1 else batch[0]


def plan_actions(policy: Policy, policies: Iterable[Policy]) -> list[str]:
    """The actions ``policy``'s tables may carry (see the module docstring), sorted."""
    named = {a for p in policies for a in p.actions} | set(policy.actions)
    return sorted(a for a in named if policy.formats_for(a))


def policy_watched(
    rows: Iterable[RegisteredTable], catalogs: Mapping[str, CatalogSpec], factories: FactoryRegistry
) -> dict[str, list[tuple[TableSpec, CatalogSpec, dict[str, SchedulePlan]]]]:
    """Per policy, its enrolled tables that have event-driven actions (what its asset's watchers serve), from
    the rows the full parse has read already: no store read here. A policy's tables mostly share one actions
    block, so the plans are resolved once per (format, actions block). A table whose catalog is unknown or
    whose settings no longer validate has no watcher (its plan reports it)."""
    out: dict[str, list[tuple[TableSpec, CatalogSpec, dict[str, SchedulePlan]]]] = {}
    resolved: dict[tuple[str, str], dict[str, SchedulePlan] | None] = {}
    for row in rows:
        spec = row.spec
        catalog = catalogs.get(spec.catalog)
        if row.managed_by != Owner.POLICY or not row.policy or catalog is None:
            continue
        key = (str(spec.format), json.dumps(spec.actions, sort_keys=True, default=str))
        if key not in resolved:
            try:
                resolved[key] = event_plans(spec, factories)
            except Exception:  # noqa: BLE001 - the plan reports a table whose settings do not validate
                resolved[key] = None
        plans = resolved[key]
        if plans:
            out.setdefault(row.policy, []).append((spec, catalog, plans))
    return out


def _setting(read: Any, default: int) -> int:
    """A concurrency setting, or its default when it does not validate (named in the log): a bad setting must
    not hide every planned DAG."""
    try:
        return int(read())
    except Exception as e:  # noqa: BLE001
        log.error("tablemgmt: %s; the default %d applies", e, default)
        return default


def _warn_capacity(watchers: int) -> None:
    """The capacity warning for the policies' watchers (one per enrolled table with event-driven actions),
    which the declared tables' watchers (warned about by ``build.py``) add to."""
    from airflow_tablemgmt.dag_factory.assets import watcher_capacity_warning
    from airflow_tablemgmt.dag_factory.build import triggerer_slots

    warning = watcher_capacity_warning(watchers, *triggerer_slots())
    if warning:
        log.warning("%s (the policies' enrolled tables alone)", warning)


def _schedule(plan: SchedulePlan, asset: Asset | None) -> Any:
    """An event-driven action on the policy's asset or its fallback interval; else (or with nothing to
    watch yet) every interval."""
    if plan.trigger == "event" and asset is not None:
        assert plan.fallback is not None
        return AssetOrTimeSchedule(timetable=_timetable(plan.fallback), assets=asset)
    return _timetable(plan.interval)


def build_plan_dag(
    policy: Policy,
    action: str,
    policies: Sequence[Policy],
    *,
    batches_at_once: int,
    asset: Asset | None = None,
    runs_at_once: int = 1,
) -> DAG:
    """``asset``: the policy's (:func:`~airflow_tablemgmt.dag_factory.assets.policy_asset`), for an
    event-driven action; None: a time schedule on the interval. ``runs_at_once``: ``max_active_runs`` of an
    event-driven DAG (an event's run starts beside the runs still active, each table kept by its lease and the
    batches bounded across runs by ``max_active_tis_per_dag``); a DAG on an interval only runs one at a time."""
    from airflow_tablemgmt.services.plan_settings import plan_schedule, policy_action_settings

    plan = plan_schedule(policy, action, policies)
    interval = plan.interval
    evented = plan.trigger == "event" and asset is not None
    when = (
        f"every {plan.fallback} and on its tables' new data snapshots (each table at most every {interval})"
        if evented
        else f"every {interval}"
    )
    settings = policy_action_settings(policy, action) if action in policy.actions else None
    retries = settings.retries if settings is not None else 1
    retry_delay = settings.retry_delay if settings is not None else None
    task_args: dict[str, Any] = {"retries": retries}
    if retry_delay is not None:
        task_args["retry_delay"] = retry_delay
    with DAG(
        dag_id=plan_dag_id(policy.name, action),
        schedule=_schedule(plan, asset),
        start_date=START_DATE,
        catchup=False,
        max_active_runs=runs_at_once if evented else 1,
        tags=["tablemgmt", "plan", f"policy:{policy.name}", action],
        description=f"{action} on the tables policy {policy.name} enrolled, planned {when}",
        doc_md=(
            f"**{action}** on the tables policy `{policy.name}` enrolled, {when}: `plan` selects the "
            "tables where it pays from their stored health (no JVM), `run_batch` runs each batch's tables one "
            f"after another, each under its own lease and process; at most {batches_at_once} batches at once"
            + (f" across up to {runs_at_once} runs" if evented and runs_at_once > 1 else "")
            + " (docs/planning.md)."
        ),
        is_paused_upon_creation=False,
        auto_register=False,
    ) as dag:
        planned = PlanOperator(task_id=PLAN_TASK, policy=policy.name, action=action, **task_args).output
        RunBatchOperator.partial(
            task_id=BATCH_TASK,
            policy=policy.name,
            action=action,
            max_active_tis_per_dag=batches_at_once,
            map_index_template="{{ batch_label }}",
            **task_args,
        ).expand(batch=planned)
    return dag


def build_plan_dags(
    policies: Sequence[Policy], only_dag_id: str | None = None, watched: Watched | None = None
) -> dict[str, DAG]:
    """A planned DAG per (policy, action) (only ``only_dag_id``'s when given); a policy whose DAGs cannot be
    built is logged by name and the others still build.

    ``watched`` (:func:`policy_watched`, the full parse): each policy's asset gets its tables' watchers, and
    a policy without watched tables plans its event-driven actions on their interval. None (a task start):
    the asset by name only, no table read."""
    from airflow_tablemgmt.services import plan_settings as settings

    at_once = _setting(settings.max_active_batches, settings.DEFAULT_MAX_ACTIVE_BATCHES)
    runs_at_once = _setting(settings.max_active_runs, settings.DEFAULT_MAX_ACTIVE_RUNS)
    out: dict[str, DAG] = {}
    if watched is not None:
        _warn_capacity(sum(len(tables) for tables in watched.values()))
    for policy in policies:
        if watched is None:
            asset: Asset | None = Asset(name=policy_asset_name(policy.name), group="tablemgmt")
        else:
            try:
                asset = policy_asset(policy.name, watched.get(policy.name, ()))
            except Exception as e:  # noqa: BLE001 - its DAGs still run on their intervals
                log.error("policy %s: its tables' snapshot watchers could not be built: %s", policy.name, e)
                asset = None
        for action in plan_actions(policy, policies):
            dag_id = plan_dag_id(policy.name, action)
            if only_dag_id is not None and dag_id != only_dag_id:
                continue
            try:
                out[dag_id] = build_plan_dag(
                    policy, action, policies, batches_at_once=at_once, asset=asset, runs_at_once=runs_at_once
                )
            except Exception as e:  # noqa: BLE001 - one broken policy must not hide the others' DAGs
                log.error("policy %s: its %s DAG could not be built: %s", policy.name, action, e)
    return out
