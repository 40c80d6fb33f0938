"""Planned DAGs (``dag_factory/plan.py``, ADR 0004 decision 1): one per (policy, action) for the tables a policy
enrolled, not one per (enrolled table, action); declared tables keep theirs; a task start builds only its DAG;
the mapped batch task carries the concurrency setting."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_tablemgmt.core.naming import parse_dag_id, plan_dag_id, plan_of
from airflow_tablemgmt.core.policies import Policy, parse_policy
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.store import Store
from airflow_tablemgmt.store.enrolment import EnrolmentRepository
from airflow_tablemgmt.store.policies import PolicyRepository

ACTIONS = {"rewrite-files": {"interval": "2h"}, "expire-snapshots": {}}


def _policy(
    name: str = "fleet", namespace: str | None = None, actions: dict[str, Any] | None = None
) -> Policy:
    match: dict[str, Any] = {"catalog": "lake", "format": "iceberg"}
    if namespace:
        match["namespace"] = namespace
    return parse_policy({"name": name, "match": match, "actions": ACTIONS if actions is None else actions})


def _store(tmp_path: Path, enrolled: int, policies: list[Policy]) -> Store:
    store = Store(f"sqlite:///{tmp_path / 'tablemgmt.db'}")
    store.catalogs.upsert(
        CatalogSpec(name="lake", type="jdbc", warehouse=str(tmp_path), properties={"uri": "jdbc:sqlite:x"}),
        Owner.STORE,
    )
    repo = PolicyRepository.of(store)
    for p in policies:
        repo.upsert(p, Owner.STORE)
    enrol = EnrolmentRepository.of(store)
    for i in range(enrolled):
        policy = policies[i % len(policies)]
        spec = TableSpec(catalog="lake", namespace="s", name=f"t{i:03d}", actions=dict(policy.actions))
        enrol.enrol(spec, policy.name, "matched")
    declared = TableSpec(catalog="lake", namespace="own", name="declared", actions={"rewrite-files": {}})
    store.tables.upsert(declared, Owner.STORE)
    return store


def test_the_ids_of_planned_dags() -> None:
    assert plan_dag_id("fleet", "rewrite-files") == "tms__plan__fleet__rewrite-files"
    assert plan_of("tms__plan__fleet__rewrite-files") == ("fleet", "rewrite-files")
    assert plan_of("tms__plan__a__b__expire-snapshots") == ("a__b", "expire-snapshots")
    assert parse_dag_id("tms__plan__fleet__rewrite-files") is None  # never a table's DAG
    assert plan_of("tms__plan.db.t__rewrite-files") is None  # a table of catalog 'plan'
    assert plan_of("tms__discover__fleet") is None


def test_the_dag_count_is_policies_times_actions_not_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_tablemgmt.dag_factory.dag_file import load_registry_and_build

    monkeypatch.setenv("AIRFLOW__TABLEMGMT__DAG_CACHE_DIR", "off")
    policies = [_policy("fleet"), _policy("eu", namespace="eu")]
    store = _store(tmp_path, 40, policies)
    dags = load_registry_and_build(None, store=store).dags
    planned = sorted(d for d in dags if plan_of(d))
    assert planned == [
        plan_dag_id(p, a) for p in ("eu", "fleet") for a in ("expire-snapshots", "rewrite-files")
    ]  # 2 policies x 2 actions, for 40 enrolled tables
    tables = sorted({parse_dag_id(d)[0] for d in dags if parse_dag_id(d)})  # type: ignore[index]
    assert tables == ["lake.own.declared"]  # the declared table keeps its own DAG, no enrolled table has one
    assert "tms__lake.own.declared__rewrite-files" in dags
    # planned, discovery, the declared table's two (its own rewrite-files, expire-snapshots from the policy)
    assert len(dags) == 4 + 2 + 2
    store.dispose()


def test_a_task_start_builds_only_its_planned_dag(tmp_path: Path) -> None:
    from airflow_tablemgmt.dag_factory.dag_file import load_registry_and_build

    store = _store(tmp_path, 3, [_policy()])
    dag_id = plan_dag_id("fleet", "rewrite-files")
    one = load_registry_and_build(None, only_dag_id=dag_id, store=store)
    assert list(one.dags) == [dag_id]
    # an enrolled table's old per-table DAG id builds nothing (its policy's planned DAG runs it)
    gone = load_registry_and_build(None, only_dag_id="tms__lake.s.t000__rewrite-files", store=store)
    assert gone.dags == {}
    store.dispose()


def test_the_shape_schedule_and_concurrency(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_tablemgmt.dag_factory.plan import BATCH_TASK, PLAN_TASK, build_plan_dags

    monkeypatch.setenv("AIRFLOW__TABLEMGMT__PLAN_MAX_ACTIVE_BATCHES", "3")
    catalog_wide = _policy(
        "all", actions={"rewrite-files": {"interval": "30m", "trigger": "schedule"}, "delete-orphans": {}}
    )
    dags = build_plan_dags([_policy("fleet"), catalog_wide])
    # fleet's tables may take delete-orphans from the catalog-wide policy that also matches them
    assert sorted(dags) == [
        plan_dag_id("all", "delete-orphans"),
        plan_dag_id("all", "expire-snapshots"),
        plan_dag_id("all", "rewrite-files"),
        plan_dag_id("fleet", "delete-orphans"),
        plan_dag_id("fleet", "expire-snapshots"),
        plan_dag_id("fleet", "rewrite-files"),
    ]
    dag = dags[plan_dag_id("fleet", "expire-snapshots")]
    assert dag.timetable.delta == timedelta(days=1)  # the action's default interval
    # an action fleet does not name: the interval of the policies that do (none here), else its default
    orphans = dags[plan_dag_id("fleet", "delete-orphans")]
    assert orphans.timetable.delta == timedelta(days=1), orphans.timetable
    assert dags[plan_dag_id("all", "rewrite-files")].timetable.delta == timedelta(minutes=30)  # 'schedule'
    # fleet's rewrite-files runs on new snapshots (its default): on the policy's asset, by name only here (no
    # table rows given, as at a task start), and a full plan every interval (no fallback-interval named)
    events = dags[plan_dag_id("fleet", "rewrite-files")].timetable
    assert events.asset_condition.name == "tablemgmt.policy.fleet" and not events.asset_condition.watchers
    assert events.timetable.delta == timedelta(hours=2)
    named = build_plan_dags(
        [_policy("x", actions={"rewrite-files": {"interval": "2h", "fallback-interval": "1d"}})]
    )
    assert named[plan_dag_id("x", "rewrite-files")].timetable.timetable.delta == timedelta(days=1)
    assert dag.max_active_runs == 1 and not dag.catchup and "policy:fleet" in dag.tags
    plan, batch = dag.get_task(PLAN_TASK), dag.get_task(BATCH_TASK)
    assert batch.upstream_task_ids == {PLAN_TASK} and plan.downstream_task_ids == {BATCH_TASK}
    assert batch.max_active_tis_per_dag == 3
    from airflow.sdk.definitions.mappedoperator import MappedOperator

    assert isinstance(batch, MappedOperator)  # run_batch.expand(batch=plan)


def test_a_bad_concurrency_setting_names_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_tablemgmt.services.errors import InvalidInput
    from airflow_tablemgmt.services.plan_runs import max_active_batches

    monkeypatch.setenv("AIRFLOW__TABLEMGMT__PLAN_MAX_ACTIVE_BATCHES", "0")
    with pytest.raises(
        InvalidInput, match=r"plan_max_active_batches: '0' is not allowed; allowed: a whole number >= 1"
    ):
        max_active_batches()
    monkeypatch.delenv("AIRFLOW__TABLEMGMT__PLAN_MAX_ACTIVE_BATCHES")
    assert max_active_batches() == 4


def test_rest_names_an_enrolled_tables_planned_dags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_tablemgmt.api import airflow_side
    from airflow_tablemgmt.api.views import actions_of

    seen: list[str] = []

    def states(dag_ids: Any) -> dict[str, Any]:  # no Airflow database here
        seen.extend(dag_ids)
        return {}

    monkeypatch.setattr(airflow_side, "dag_states", states)
    store = _store(tmp_path, 1, [_policy()])
    out = {a.action: a for a in actions_of(store, store.tables.get_registered("lake.s.t000"))}
    assert {a: o.dag_id for a, o in out.items()} == {
        "expire-snapshots": "tms__plan__fleet__expire-snapshots",
        "rewrite-files": "tms__plan__fleet__rewrite-files",
    }
    assert sorted(seen) == sorted(o.dag_id for o in out.values())
    files = out["rewrite-files"]
    assert (files.trigger, files.interval) == ("event", "2h"), files  # the policy's interval for it
    assert files.schedule == (
        "planned with policy fleet's tables every 2h and on their new data snapshots (polled every 1s, each "
        "table at most every 2h); run where it pays"
    )
    expiry = out["expire-snapshots"]
    assert (expiry.trigger, expiry.interval) == ("schedule", "1d"), expiry
    assert expiry.schedule == "planned with policy fleet's tables every 1d; run where it pays"
    declared = actions_of(store, store.tables.get_registered("lake.own.declared"))
    assert "tms__lake.own.declared__rewrite-files" in [a.dag_id for a in declared]
    store.dispose()


def test_a_killed_batch_kills_the_job_of_the_table_it_is_running() -> None:
    from airflow_tablemgmt.dag_factory.plan import RunBatchOperator, batch_label

    op = RunBatchOperator(
        task_id="run_batch", batch=["lake.s.a", "lake.s.b"], policy="fleet", action="rewrite-files"
    )
    op.on_kill()  # between tables: nothing to kill

    class Runner:
        killed = 0

        def kill(self) -> None:
            self.killed += 1

    running = Runner()
    op._runner = running
    op.on_kill()
    assert running.killed == 1
    assert batch_label(["lake.s.a", "lake.s.b", "lake.s.c"]) == "lake.s.a +2" and batch_label(["x"]) == "x"


def _statements(store: Store) -> list[str]:
    from sqlalchemy import event

    seen: list[str] = []
    event.listen(store.engine, "before_cursor_execute", lambda *a: seen.append(a[2]))
    return seen


def test_an_event_driven_action_is_planned_on_its_policys_asset_watching_each_enrolled_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.sdk import AssetOrTimeSchedule

    from airflow_tablemgmt.dag_factory.dag_file import load_registry_and_build

    monkeypatch.setenv("AIRFLOW__TABLEMGMT__DAG_CACHE_DIR", "off")
    policies = [_policy("fleet"), _policy("eu", namespace="eu")]
    counts: dict[int, tuple[int, int]] = {}
    for enrolled in (4, 40):
        store = _store(tmp_path / str(enrolled), enrolled, policies)
        statements = _statements(store)
        dags = load_registry_and_build(None, store=store).dags
        full = len(statements)
        one = load_registry_and_build(None, only_dag_id=plan_dag_id("fleet", "rewrite-files"), store=store)
        counts[enrolled] = (full, len(statements) - full)
        store.dispose()
        # rewrite-files runs on new snapshots by default: on the policy's asset, one watcher per enrolled table
        timetable = dags[plan_dag_id("fleet", "rewrite-files")].timetable
        assert isinstance(timetable, AssetOrTimeSchedule)
        asset = timetable.asset_condition
        assert asset.name == "tablemgmt.policy.fleet"
        watched = [w.trigger.table_id for w in asset.watchers]
        assert watched == [f"lake.s.t{i:03d}" for i in range(0, enrolled, 2)]  # fleet's half, sorted
        assert all(w.trigger.actions == {"rewrite-files": 7200.0} for w in asset.watchers)  # its interval
        assert timetable.timetable.delta == timedelta(hours=2)  # and a full plan every interval
        eu = dags[plan_dag_id("eu", "rewrite-files")].timetable.asset_condition
        assert [w.trigger.table_id for w in eu.watchers] == [
            f"lake.s.t{i:03d}" for i in range(1, enrolled, 2)
        ]
        assert dags[plan_dag_id("fleet", "expire-snapshots")].timetable.delta == timedelta(
            days=1
        )  # not evented
        # the declared table keeps its own asset; no enrolled table is watched twice
        own = dags["tms__lake.own.declared__rewrite-files"].timetable.asset_condition
        assert [w.trigger.table_id for w in own.watchers] == ["lake.own.declared"]
        # a task start builds the same DAG id on the same asset, by name only: no table row read
        started = one.dags[plan_dag_id("fleet", "rewrite-files")].timetable.asset_condition
        assert started.name == asset.name and not started.watchers
    # the parse reads the table rows it read before, no read per enrolled table; a task start none of them
    assert counts[4] == counts[40], counts


def test_the_policies_watchers_past_the_triggerers_capacity_are_warned_about(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from airflow_tablemgmt.dag_factory.assets import event_plans
    from airflow_tablemgmt.dag_factory.plan import build_plan_dags
    from airflow_tablemgmt.factories.discovery import default_factories

    monkeypatch.setenv("AIRFLOW__TRIGGERER__CAPACITY", "2")
    lake = CatalogSpec(name="lake", warehouse="/tmp/lake")
    tables = [TableSpec(catalog="lake", namespace="s", name=f"t{i}", actions=dict(ACTIONS)) for i in range(3)]
    watched = {"fleet": [(t, lake, event_plans(t, default_factories())) for t in tables]}
    with caplog.at_level("WARNING"):
        dags = build_plan_dags([_policy()], watched=watched)
    assert "3 snapshot watchers" in caplog.text and "the policies' enrolled tables alone" in caplog.text
    assert len(dags[plan_dag_id("fleet", "rewrite-files")].timetable.asset_condition.watchers) == 3
