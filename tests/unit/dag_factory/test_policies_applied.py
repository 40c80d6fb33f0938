"""A policy reaches a declared table at run time: the DAG file builds a declared table's DAGs from its
declaration with the stored policies merged in (its own keys win), on the full parse (through the DAG cache,
whose key holds the matching policies) and on a task start's single-DAG parse, and the workers read the same
spec (``store/effective.py``: ``effective_table``). Property-conditioned policies and the opt-out property do
not reach a declared table; its ``maintenance: disabled`` does."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from airflow_tablemgmt.core.policies import parse_policy
from airflow_tablemgmt.core.tables import Owner, TableSpec
from airflow_tablemgmt.dag_factory import cache as dag_cache
from airflow_tablemgmt.dag_factory.dag_file import load_registry_and_build
from airflow_tablemgmt.store import Store
from airflow_tablemgmt.store.effective import PolicyMerge, effective_of, effective_table
from airflow_tablemgmt.store.policies import PolicyRepository

YAML = """\
catalogs:
  - {name: lake, warehouse: /data/wh}
tables:
  - catalog: lake
    namespace: sales
    name: orders
    actions:
      delete-orphans: {retries: 2}
  - catalog: lake
    namespace: sales
    name: quiet
    maintenance: disabled
"""
ORDERS = "lake.sales.orders"
ORPHANS_DAG = f"tms__{ORDERS}__delete-orphans"
MANIFESTS_DAG = f"tms__{ORDERS}__rewrite-manifests"

LAKE = {
    "name": "lake-all",
    "match": {"catalog": "lake", "format": "iceberg"},
    "actions": {
        "delete-orphans": {"interval": "3d", "retries": 5},
        "rewrite-manifests": {"trigger": "schedule"},
    },
}


def policy(doc: dict):  # type: ignore[no-untyped-def,type-arg]
    return parse_policy(doc)


def table(name: str, actions: dict, **kw) -> TableSpec:  # type: ignore[no-untyped-def,type-arg]
    return TableSpec.model_validate(
        {"catalog": "lake", "namespace": "sales", "name": name, "actions": actions, **kw}
    )


# --- the merge -----------------------------------------------------------------------------------------------


def test_merge_gives_a_declared_table_the_policys_keys_and_keeps_its_own() -> None:
    merge = PolicyMerge([policy(LAKE)])
    spec = table("orders", {"delete-orphans": {"retries": 2}})
    out = merge.apply(spec)
    orphans = out.action_settings("delete-orphans")
    assert orphans.interval == "3d"  # the policy's: the table does not set it
    assert orphans.retries == 2  # the table's own value wins
    assert out.enabled_actions() == ["delete-orphans", "rewrite-manifests"]  # the policy enables one more
    # the second table of the same shape comes from the memo: its own id, the same settings
    other = merge.apply(table("lines", {"delete-orphans": {"retries": 2}}))
    assert other.id == "lake.sales.lines" and other.actions == out.actions
    assert merge.key(spec) and merge.key(spec) == merge.key(other)


def test_merge_leaves_alone_what_no_policy_reaches() -> None:
    by_property = policy({**LAKE, "name": "tagged", "match": {"properties": {"team": "x"}}})
    merge = PolicyMerge([by_property, policy({**LAKE, "match": {"catalog": "other"}})])
    spec = table("orders", {"delete-orphans": {}})
    assert (
        merge.apply(spec) is spec and merge.key(spec) == ""
    )  # a property condition: declared tables unmatched
    merge = PolicyMerge([policy(LAKE)])
    quiet = table("quiet", {}, maintenance="disabled")
    assert merge.apply(quiet) is quiet  # the declaration's opt-out


def test_a_failed_merge_runs_the_own_declaration_and_says_why() -> None:
    a = policy(
        {**LAKE, "name": "a", "match": {"catalog": "lake"}, "actions": {"delete-orphans": {"retries": 1}}}
    )
    b = policy(
        {**LAKE, "name": "b", "match": {"catalog": "lake"}, "actions": {"delete-orphans": {"retries": 4}}}
    )
    spec = table("orders", {"delete-orphans": {}})
    out, error = PolicyMerge([a, b]).apply_or_own(spec)
    assert out is spec and error is not None and "'a' and 'b'" in error and ORDERS in error


def test_effective_table_merges_a_declared_row_not_an_enrolled_one(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        PolicyRepository.of(store).upsert(policy(LAKE), Owner.STORE)
        store.tables.upsert(table("orders", {"delete-orphans": {"retries": 2}}), Owner.STORE)
        spec = effective_table(store, ORDERS)
        assert spec.action_settings("delete-orphans").interval == "3d"
        assert spec.action_settings("delete-orphans").retries == 2
        assert "rewrite-manifests" in spec.enabled_actions()
        assert store.tables.get(ORDERS).enabled_actions() == [
            "delete-orphans"
        ]  # the declaration is unchanged
        enrolled = store.tables.get_registered(ORDERS).__class__(
            spec=table("orders", {"delete-orphans": {}}),
            managed_by=Owner.POLICY,
            created_at=None,
            updated_at=None,
        )
        assert effective_of(enrolled, PolicyMerge([policy(LAKE)])).enabled_actions() == ["delete-orphans"]
    finally:
        store.dispose()


# --- the DAG file -------------------------------------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(f"sqlite:///{tmp_path / 'store.db'}")
    yield s
    s.dispose()


@pytest.fixture
def yaml(tmp_path: Path) -> Path:
    y = tmp_path / "dags" / "tables.yaml"
    y.parent.mkdir()
    y.write_text(YAML)
    return y


def orphans_task(dags: dict):  # type: ignore[no-untyped-def,type-arg]
    [task] = dags[ORPHANS_DAG].tasks
    return task


def test_the_dag_file_builds_a_declared_table_with_the_policy_merged_in(
    store: Store, yaml: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__DAG_CACHE_DIR", str(tmp_path / "cache"))
    repo = PolicyRepository.of(store)
    repo.upsert(policy(LAKE), Owner.STORE)
    full = load_registry_and_build(yaml, store=store)
    assert not full.errors
    assert MANIFESTS_DAG in full.dags  # an action only the policy enables
    assert not any(d.startswith("tms__lake.sales.quiet__") for d in full.dags)  # opted out by its declaration
    assert full.dags[ORPHANS_DAG].timetable.delta == timedelta(days=3)  # the policy's interval
    assert orphans_task(full.dags).retries == 2  # the table's own value wins
    # a task start builds its one DAG the same way
    one = load_registry_and_build(yaml, store=store, only_dag_id=ORPHANS_DAG)
    assert one.dags[ORPHANS_DAG].timetable.delta == timedelta(days=3) and orphans_task(one.dags).retries == 2

    # a policy change reaches the DAG: the cache key holds the matching policies
    repo.upsert(policy({**LAKE, "actions": {"delete-orphans": {"interval": "12h"}}}), Owner.STORE)
    again = load_registry_and_build(yaml, store=store)
    assert ORDERS in dag_cache.last_stats.built
    assert again.dags[ORPHANS_DAG].timetable.delta == timedelta(hours=12)
    assert MANIFESTS_DAG not in again.dags
    unchanged = load_registry_and_build(yaml, store=store)
    assert dag_cache.last_stats.built == [] and unchanged.dags[ORPHANS_DAG].timetable.delta == timedelta(
        hours=12
    )

    repo.delete("lake-all", Owner.STORE)
    gone = load_registry_and_build(yaml, store=store)
    assert gone.dags[ORPHANS_DAG].timetable.delta != timedelta(hours=12)  # the table's own default again


def test_a_conflict_is_a_declaration_error_and_the_table_keeps_its_dags(
    store: Store, yaml: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__DAG_CACHE_DIR", str(tmp_path / "cache"))
    repo = PolicyRepository.of(store)
    repo.upsert(policy({**LAKE, "name": "a", "match": {"catalog": "lake"}}), Owner.STORE)
    repo.upsert(policy({**LAKE, "name": "b", "match": {"catalog": "lake"}}), Owner.STORE)
    for _ in range(2):  # never cached: the error comes back on every parse
        result = load_registry_and_build(yaml, store=store)
        assert any(ORDERS in e and "'a' and 'b'" in e for e in result.errors), result.errors
        assert ORPHANS_DAG in result.dags and MANIFESTS_DAG not in result.dags


def test_explain_shows_what_a_declared_table_runs(store: Store) -> None:
    from airflow_tablemgmt.services.policies import explain

    tagged = policy({**LAKE, "name": "tagged", "match": {"catalog": "lake", "properties": {"team": "x"}}})
    for p in (policy(LAKE), tagged):
        PolicyRepository.of(store).upsert(p, Owner.STORE)
    store.tables.upsert(table("orders", {"delete-orphans": {"retries": 2}}), Owner.STORE)
    props = {"team": "x", "tablemgmt.maintenance": "disabled"}
    e = explain(store, ORDERS, properties=props).to_dict()
    assert e["applied"] is True and e["opted-out"] is None  # the property does not opt a declared table out
    assert e["actions"]["delete-orphans"]["interval"] == {"value": "3d", "source": "policy:lake-all"}
    assert [(p["name"], p["applies"]) for p in e["policies"]] == [("tagged", False), ("lake-all", True)]
    assert any(n.startswith("policy tagged matches on table properties (team)") for n in e["notes"])
    assert any(
        "a declared table opts out of the policies with maintenance: disabled" in n for n in e["notes"]
    )
    # what explain shows is what the workers read
    worker = effective_table(store, ORDERS)
    assert worker.enabled_actions() == e["enabled"] == ["delete-orphans", "rewrite-manifests"]
    for action, keys in e["actions"].items():
        dumped = worker.action_settings(action).model_dump(mode="json", by_alias=True)
        assert {k: s["value"] for k, s in keys.items() if "." not in k} == {
            k: v for k, v in dumped.items() if k != "thresholds"
        }


def test_rest_lists_the_actions_a_policy_gives_a_declared_table(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_tablemgmt.api import airflow_side
    from airflow_tablemgmt.api.views import actions_of

    monkeypatch.setattr(airflow_side, "dag_states", lambda dag_ids: {})  # no Airflow database here

    PolicyRepository.of(store).upsert(policy(LAKE), Owner.STORE)
    store.tables.upsert(table("orders", {"delete-orphans": {"retries": 2}}), Owner.STORE)
    out = {a.action: a for a in actions_of(store, store.tables.get_registered(ORDERS))}
    assert sorted(out) == ["delete-orphans", "rewrite-manifests"]
    assert out["delete-orphans"].dag_id == ORPHANS_DAG
