"""``tms_policy`` (migration 0009, ``store/policies.py``) on SQLite and a real PostgreSQL: policies round-trip
through their validated spec, a declarations file owns its policies, and the sync's pruning removes only the
code-owned ones named."""

from __future__ import annotations

import pytest

from airflow_tablemgmt.core.errors import InvalidDeclaration
from airflow_tablemgmt.core.policies import Policy, PolicyNotFound, parse_policy
from airflow_tablemgmt.core.tables import Owner
from airflow_tablemgmt.store import Store
from airflow_tablemgmt.store.policies import PolicyManagedByCode, PolicyRepository

pytestmark = pytest.mark.integration


def lake_policy(retain: int = 5, name: str = "lake-all") -> Policy:
    return parse_policy(
        {
            "name": name,
            "match": {"catalog": "lake", "namespace": ["sales.*", "ops"], "format": "iceberg"},
            "actions": {
                "expire-snapshots": {"retain-last": retain, "older-than": "5d"},
                "rewrite-manifests": None,
            },
            "discovery-interval": "15m",
        }
    )


def test_a_policy_round_trips_and_an_equal_write_writes_nothing(store: Store) -> None:
    repo = PolicyRepository.of(store)
    assert repo.upsert(lake_policy(), Owner.STORE) == "created"
    stored = repo.get("lake-all")
    assert stored.policy == lake_policy()
    assert stored.managed_by == Owner.STORE and stored.source is None
    assert stored.created_at.tzinfo is not None
    assert repo.upsert(lake_policy(), Owner.STORE) == "unchanged"
    assert repo.get("lake-all").updated_at == stored.updated_at
    assert repo.upsert(lake_policy(retain=9), Owner.STORE) == "updated"
    assert repo.get("lake-all").policy.actions["expire-snapshots"]["retain-last"] == 9
    assert [p.name for p in repo.list()] == ["lake-all"]


def test_a_files_policy_refuses_the_store_and_takes_a_store_policy_over(store: Store) -> None:
    repo = PolicyRepository.of(store)
    repo.upsert(lake_policy(), Owner.STORE)
    assert repo.upsert(lake_policy(), Owner.CODE, "dags/tables.yaml") == "updated"  # the file takes it over
    stored = repo.get("lake-all")
    assert (stored.managed_by, stored.source) == (Owner.CODE, "dags/tables.yaml")
    with pytest.raises(PolicyManagedByCode, match="policy lake-all is declared in dags/tables.yaml; change"):
        repo.upsert(lake_policy(retain=2), Owner.STORE)
    with pytest.raises(PolicyManagedByCode):
        repo.delete("lake-all", Owner.STORE)
    assert repo.get("lake-all").policy == lake_policy()  # nothing changed by the refusals
    assert repo.code_policies() == {"lake-all": "dags/tables.yaml"}


def test_delete_and_not_found_name_the_policies_there_are(store: Store) -> None:
    repo = PolicyRepository.of(store)
    repo.upsert(lake_policy(name="a"), Owner.STORE)
    repo.upsert(lake_policy(name="b"), Owner.STORE)
    repo.delete("a", Owner.STORE)
    with pytest.raises(PolicyNotFound, match="policy 'a' does not exist; policies: b"):
        repo.get("a")
    with pytest.raises(PolicyNotFound):
        repo.delete("a", Owner.STORE)


def test_pruning_removes_only_the_code_owned_policies_named(store: Store) -> None:
    repo = PolicyRepository.of(store)
    repo.upsert(lake_policy(name="by-file"), Owner.CODE, "dags/tables.yaml")
    repo.upsert(lake_policy(name="by-rest"), Owner.STORE)
    assert repo.remove_code_policies(["by-file", "by-rest", "unknown"]) == ["by-file"]
    assert [p.name for p in repo.list()] == ["by-rest"]


def test_a_stored_spec_that_no_longer_validates_is_reported_not_fatal(store: Store) -> None:
    from sqlalchemy import update

    from airflow_tablemgmt.store.models import PolicyRow

    repo = PolicyRepository.of(store)
    repo.upsert(lake_policy(name="good"), Owner.STORE)
    repo.upsert(lake_policy(name="old"), Owner.STORE)
    with store.engine.begin() as conn:  # as an older version might have written it
        conn.execute(
            update(PolicyRow.__table__)
            .where(PolicyRow.__table__.c.name == "old")
            .values(spec={"name": "old", "actions": {"no-such-action": {}}})
        )
    policies, errors = repo.list_with_errors()
    assert [p.name for p in policies] == ["good"]
    assert [e.name for e in errors] == ["old"]
    assert "unknown action 'no-such-action'" in errors[0].message
    with pytest.raises(InvalidDeclaration, match="policy old: its stored spec no longer validates"):
        repo.get("old")


def test_enrolled_counts_are_the_live_tables_each_policy_enrolled(store: Store) -> None:
    from sqlalchemy import update

    from airflow_tablemgmt.core.tables import TableSpec
    from airflow_tablemgmt.store.models import TableRow

    t = TableRow.__table__
    for name in ("a", "b", "c", "declared"):
        store.tables.upsert(TableSpec(catalog="lake", namespace="s", name=name), Owner.STORE)
    with store.engine.begin() as conn:  # as discovery's enrolment writes them (store/enrolment.py)
        conn.execute(update(t).where(t.c.name.in_(["a", "b"])).values(policy="fleet", managed_by="policy"))
        conn.execute(update(t).where(t.c.name == "c").values(policy="eu", managed_by="policy"))
    assert PolicyRepository.of(store).enrolled_counts() == {"fleet": 2, "eu": 1}
    store.tables.remove("lake.s.b", Owner.POLICY)  # retired: soft-deleted, no longer counted
    assert PolicyRepository.of(store).enrolled_counts() == {"fleet": 1, "eu": 1}
