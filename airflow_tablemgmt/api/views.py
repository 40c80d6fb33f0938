"""Services' results -> response models."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.api.schemas import (
    ActionOut,
    BadgeOut,
    ProcessOut,
    RowHealthOut,
    TableOut,
    TableSummaryOut,
)
from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.services.overview import removed_by
from airflow_tablemgmt.services.processes import timings

if TYPE_CHECKING:
    from airflow_tablemgmt.core.process import Process
    from airflow_tablemgmt.services.overview import TableRow
    from airflow_tablemgmt.store import RegisteredTable, Store


#: The largest integer a JSON reader using doubles (JavaScript, jq) keeps exactly.
JSON_SAFE_INT = 2**53 - 1


def json_safe(value: Any) -> Any:
    """``value`` with every integer beyond ±2^53 as a string (Iceberg snapshot ids inside a summary):
    the UI and jq would silently round it to another id."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return str(value) if abs(value) > JSON_SAFE_INT else value
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def process_out(p: Process) -> ProcessOut:
    data: dict[str, Any] = dict(p.__dict__)
    data.pop("heartbeat_every_s", None)  # the reaper's input, not part of the API's process
    data["snapshot_id"] = str(p.snapshot_id) if p.snapshot_id is not None else None
    data["summary"] = json_safe(p.summary)
    data["parameters"] = json_safe(p.parameters)
    data["timings"] = timings(p)
    data["removed"] = removed_by(p)
    return ProcessOut(**data)


def actions_of(store: Store, reg: RegisteredTable) -> list[ActionOut]:
    from airflow_tablemgmt.api.airflow_side import dag_states
    from airflow_tablemgmt.core.schedule import SchedulePlan
    from airflow_tablemgmt.factories.discovery import default_factories
    from airflow_tablemgmt.services.run_now import dag_id_for
    from airflow_tablemgmt.store.effective import PolicyMerge, effective_of

    spec = effective_of(reg, PolicyMerge.load(store))  # the DAGs it has: the policies' actions included
    pairs = spec.enabled_action_settings()
    planned = _planned(store, reg)  # an enrolled table: its policy's planned DAGs run it (docs/planning.md)
    dag_ids = {a: planned[a][0] if a in planned else dag_id_for(spec.id, a) for a, _ in pairs}
    states = dag_states(dag_ids.values())
    out = []
    for action, settings in pairs:
        factory = default_factories().for_action(spec.format, action)
        plan = SchedulePlan.resolve(settings, factory.trigger_strategy(spec.format, action))
        trigger, interval, schedule = plan.trigger, str(plan.interval), plan.describe()
        if action in planned:
            _, trigger, interval, schedule = planned[action]
        dag_id = dag_ids[action]
        paused, next_run = states.get(dag_id, (None, None))
        last = store.processes.list(table_id=spec.id, action=action, limit=1)
        out.append(
            ActionOut(
                action=action,
                dag_id=dag_id,
                options=settings.options(),
                trigger=trigger,
                interval=interval,
                schedule=schedule,
                paused=paused,
                next_run=next_run,
                last_process=process_out(last[0]) if last else None,
            )
        )
    return out


def _planned(store: Store, reg: RegisteredTable) -> dict[str, tuple[str, str, str, str]]:
    """Action -> (its planned DAG id, that DAG's trigger, interval and schedule in words) for a table a policy
    enrolled; {} for another."""
    from airflow_tablemgmt.core.naming import plan_dag_id
    from airflow_tablemgmt.core.tables import Owner
    from airflow_tablemgmt.services.enrolment import load_policies
    from airflow_tablemgmt.services.plan_runs import describe_plan_schedule, plan_schedule

    if reg.managed_by != Owner.POLICY or not reg.policy:
        return {}
    policies = load_policies(store)
    policy = next((p for p in policies if p.name == reg.policy), None)
    out: dict[str, tuple[str, str, str, str]] = {}
    for action in reg.spec.enabled_actions():
        trigger, every, words = "schedule", "?", f"planned with policy {reg.policy}'s tables"
        try:
            if policy is not None:
                plan = plan_schedule(policy, action, policies)
                trigger, every, words = (
                    plan.trigger,
                    str(plan.interval),
                    describe_plan_schedule(reg.policy, plan),
                )
        except Exception:  # noqa: BLE001 - a policy that no longer gives the action: the DAG id still holds
            pass
        out[action] = (plan_dag_id(reg.policy, action), trigger, every, words)
    return out


def table_out(store: Store, reg: RegisteredTable, **extra: Any) -> TableOut:
    return TableOut(
        table=reg.spec.id,
        managed_by=str(reg.managed_by),
        policy=reg.policy,
        spec=reg.spec,
        actions=actions_of(store, reg),
        **extra,
    )


def _status(value: str | None) -> ProcessStatus | None:
    return ProcessStatus(value) if value else None


def summary_out(r: TableRow) -> TableSummaryOut:
    """A list row: badges per action and the cached health (null until measured)."""
    health = None
    if r.health is not None and r.health.files is not None:
        f = r.health.files
        health = RowHealthOut(
            **r.health.score.to_dict(),
            data_files=f.data_files,
            small_data_files=f.small_data_files,
            data_bytes=f.data_bytes,
            delete_files=f.delete_files,
            snapshots=f.snapshots,
            age_s=r.health.age_s,
        )
    elif r.health is not None and r.health.format_health is not None:  # the format's own figures
        own = r.health.format_health
        fig = own.figures
        health = RowHealthOut(
            **r.health.score.to_dict(),
            data_files=int(fig.get("data_files") or fig.get("base_files") or 0),
            small_data_files=int(fig.get("small_files") or 0),
            data_bytes=int(fig.get("data_bytes") or fig.get("total_bytes") or 0),
            delete_files=0,
            snapshots=0,
            age_s=r.health.age_s,
            format=own.format,
            format_figures=fig,
        )
    dynamic = None
    if r.dynamic:
        definition = r.dynamic.get("definition") or {}
        dynamic = {"state": r.dynamic.get("state"), "freshness": definition.get("freshness")}
    return TableSummaryOut(
        table=r.table,
        format=r.format,
        managed_by=r.managed_by,
        policy=r.policy,
        owner=r.owner,
        queue=r.queue,
        actions=r.actions,
        last_status={a: _status(r.badges[a].last_status) for a in r.actions},
        badges={
            a: BadgeOut(
                last_process=b.last_id,
                last_status=_status(b.last_status),
                last_instant=b.last_instant,
                last_finished=b.last_finished,
                last_reason=b.last_reason,
                last_success=b.last_success,
                failing_streak=b.failing_streak,
            )
            for a, b in r.badges.items()
        },
        health=health,
        dynamic=dynamic or None,
    )
