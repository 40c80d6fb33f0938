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
policies that name it, else the action's default; an event-driven action is planned on that interval too
(per-(policy, action) events are not built, ADR 0004 decision 5).

Declared tables keep their DAGs (``dag_factory/build.py``). Few DAGs (policies × actions): built on every
parse, never cached; a task start builds only its own.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from airflow.sdk import DAG, BaseOperator, get_current_context, task

from airflow_tablemgmt.core.naming import plan_dag_id
from airflow_tablemgmt.core.policies import Policy
from airflow_tablemgmt.dag_factory.build import START_DATE, _timetable

log = logging.getLogger(__name__)

PLAN_TASK = "plan"
BATCH_TASK = "run_batch"


def plan_tables(policy: str, action: str) -> list[list[str]]:
    """The ``plan`` task: the batches to map over (its XCom); the plan's counts and samples go to the log and
    to the XCom key ``plan``. A run's ``conf`` may name its tables (``{"tables": [...]}``)."""
    from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook
    from airflow_tablemgmt.services.plan_runs import plan_run

    context = get_current_context()
    conf = getattr(context.get("dag_run"), "conf", None) or {}
    named = conf.get("tables")
    if named is not None and (not isinstance(named, list) or not all(isinstance(t, str) for t in named)):
        raise ValueError(f"conf.tables: {named!r} is not allowed; allowed: a list of table ids")
    planned = plan_run(TableMgmtHook().get_store(), policy, action, tables=named)
    summary = planned.to_dict()
    log.info("tablemgmt: plan of %s for policy %s: %s", action, policy, summary["counts"])
    for kind in ("pays", "measure", "idle", "not_enabled", "unmeasured", "not_found"):
        if summary[kind]:
            log.info("tablemgmt:   %s (first %d): %s", kind, len(summary[kind]), summary[kind])
    context["ti"].xcom_push(key="plan", value=summary)
    return planned.batches


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


def build_plan_dag(policy: Policy, action: str, policies: Sequence[Policy], *, batches_at_once: int) -> DAG:
    from airflow_tablemgmt.services.plan_runs import plan_interval, policy_action_settings

    interval = plan_interval(policy, action, policies)
    settings = policy_action_settings(policy, action) if action in policy.actions else None
    retries = settings.retries if settings is not None else 1
    retry_delay = settings.retry_delay if settings is not None else None
    task_args: dict[str, Any] = {"retries": retries}
    if retry_delay is not None:
        task_args["retry_delay"] = retry_delay
    with DAG(
        dag_id=plan_dag_id(policy.name, action),
        schedule=_timetable(interval),
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        tags=["tablemgmt", "plan", f"policy:{policy.name}", action],
        description=f"{action} on the tables policy {policy.name} enrolled, planned every {interval}",
        doc_md=(
            f"**{action}** on the tables policy `{policy.name}` enrolled, every {interval}: `plan` selects the "
            "tables where it pays from their stored health (no JVM), `run_batch` runs each batch's tables one "
            f"after another, each under its own lease and process; at most {batches_at_once} batches at once "
            "(docs/planning.md)."
        ),
        is_paused_upon_creation=False,
        auto_register=False,
    ) as dag:
        planned = task(task_id=PLAN_TASK, **task_args)(plan_tables)(policy=policy.name, action=action)
        RunBatchOperator.partial(
            task_id=BATCH_TASK,
            policy=policy.name,
            action=action,
            max_active_tis_per_dag=batches_at_once,
            map_index_template="{{ batch_label }}",
            **task_args,
        ).expand(batch=planned)
    return dag


def build_plan_dags(policies: Sequence[Policy], only_dag_id: str | None = None) -> dict[str, DAG]:
    """A planned DAG per (policy, action) (only ``only_dag_id``'s when given); a policy whose DAGs cannot be
    built is logged by name and the others still build."""
    from airflow_tablemgmt.services.plan_runs import DEFAULT_MAX_ACTIVE_BATCHES, max_active_batches

    try:
        at_once = max_active_batches()
    except Exception as e:  # noqa: BLE001 - a bad setting must not hide every planned DAG
        log.error("tablemgmt: %s; the default %d applies", e, DEFAULT_MAX_ACTIVE_BATCHES)
        at_once = DEFAULT_MAX_ACTIVE_BATCHES
    out: dict[str, DAG] = {}
    for policy in policies:
        for action in plan_actions(policy, policies):
            dag_id = plan_dag_id(policy.name, action)
            if only_dag_id is not None and dag_id != only_dag_id:
                continue
            try:
                out[dag_id] = build_plan_dag(policy, action, policies, batches_at_once=at_once)
            except Exception as e:  # noqa: BLE001 - one broken policy must not hide the others' DAGs
                log.error("policy %s: its %s DAG could not be built: %s", policy.name, action, e)
    return out
