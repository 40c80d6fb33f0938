"""One discovery DAG per policy (``dag_factory/discovery.py``): its id never reads as a table's, its schedule
is the policy's discovery interval, its one task runs the policy's pass; a task start builds only its DAG."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from airflow_tablemgmt.core.naming import discovery_dag_id, discovery_policy_of, parse_dag_id
from airflow_tablemgmt.core.policies import Policy, parse_policy
from airflow_tablemgmt.core.tables import Owner
from airflow_tablemgmt.dag_factory.discovery import build_discovery_dags


def _policy(name: str, every: str) -> Policy:
    return parse_policy({"name": name, "match": {"catalog": "lake"}, "discovery-interval": every})


def test_the_ids_of_discovery_dags() -> None:
    assert discovery_dag_id("fleet") == "tms__discover__fleet"
    assert discovery_policy_of("tms__discover__fleet") == "fleet"
    assert discovery_policy_of("tms__discover__a__b") == "a__b"
    assert parse_dag_id("tms__discover__fleet") is None  # never a table's DAG
    assert discovery_policy_of("tms__lake.db.t__rewrite-files") is None
    assert discovery_policy_of("tms__discover.db.t__rewrite-files") is None  # a table of catalog 'discover'


def test_one_dag_per_policy_on_its_interval() -> None:
    dags = build_discovery_dags([_policy("fleet", "15m"), _policy("eu", "1h")])
    assert sorted(dags) == ["tms__discover__eu", "tms__discover__fleet"]
    fleet = dags["tms__discover__fleet"]
    assert fleet.timetable.delta == timedelta(minutes=15)
    assert dags["tms__discover__eu"].timetable.delta == timedelta(hours=1)
    assert "policy:fleet" in fleet.tags and fleet.max_active_runs == 1 and not fleet.catchup
    (task,) = fleet.tasks
    assert task.task_id == "discover" and task.op_kwargs == {"policy": "fleet"}
    assert list(
        build_discovery_dags([_policy("fleet", "15m"), _policy("eu", "1h")], "tms__discover__eu")
    ) == ["tms__discover__eu"]


def test_the_dag_file_builds_a_policys_discovery_dag(tmp_path: Path) -> None:
    from airflow_tablemgmt.dag_factory.dag_file import load_registry_and_build
    from airflow_tablemgmt.store import Store
    from airflow_tablemgmt.store.policies import PolicyRepository

    store = Store(f"sqlite:///{tmp_path / 'tablemgmt.db'}")
    PolicyRepository.of(store).upsert(_policy("fleet", "30m"), Owner.STORE)
    only = load_registry_and_build(None, only_dag_id="tms__discover__fleet", store=store)
    assert list(only.dags) == ["tms__discover__fleet"]
    every = load_registry_and_build(None, store=store)
    assert "tms__discover__fleet" in every.dags
    store.dispose()


def test_a_run_fails_naming_a_catalog_it_could_not_list(tmp_path: Path, monkeypatch: Any) -> None:
    import pytest

    from airflow_tablemgmt.core.tables import CatalogSpec
    from airflow_tablemgmt.dag_factory.discovery import run_discovery
    from airflow_tablemgmt.services.errors import DiscoveryIncomplete
    from airflow_tablemgmt.store import Store
    from airflow_tablemgmt.store.policies import PolicyRepository

    url = f"sqlite:///{tmp_path / 'tablemgmt.db'}"
    monkeypatch.setenv("TABLEMGMT_STORE_URL", url)
    store = Store(url)
    gone = tmp_path / "no-such-dir" / "catalog.db"
    store.catalogs.upsert(
        CatalogSpec(
            name="lake", type="jdbc", warehouse=str(tmp_path), properties={"uri": f"jdbc:sqlite:{gone}"}
        ),
        Owner.STORE,
    )
    PolicyRepository.of(store).upsert(_policy("fleet", "30m"), Owner.STORE)
    with pytest.raises(
        DiscoveryIncomplete,
        match="policy fleet: 1 catalog.* nothing retired from them: lake: catalog lake: not listed",
    ):
        run_discovery("fleet")
    store.dispose()
