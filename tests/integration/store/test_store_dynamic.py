"""DynamicTableRepository on SQLite and PostgreSQL: definition + state in one row, guarded state changes,
atomic failure counting and auto-suspend, ownership."""

from __future__ import annotations

import pytest

from airflow_tablemgmt.core.dynamic import DynamicTableSpec
from airflow_tablemgmt.core.errors import TableManagedByCode, TableNotFound
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.store import Store
from airflow_tablemgmt.store.dynamic import DynamicStateChanged, NotADynamicTable
from tests.integration.store.conftest import Race

pytestmark = pytest.mark.integration


def definition(name: str = "daily", **extra: object) -> DynamicTableSpec:
    data = {
        "identifier": f"lake.db.{name}",
        "query": "SELECT id, day FROM lake.db.src",
        "freshness": "1 HOUR",
        "partitioned-by": ["day"],
        "partition.fields.day.date-formatter": "yyyy-MM-dd",
        **extra,
    }
    return DynamicTableSpec.model_validate(data)


@pytest.fixture
def dstore(store: Store) -> Store:
    store.catalogs.upsert(CatalogSpec(name="lake", warehouse="/tmp/w"), Owner.STORE)
    return store


def test_upsert_writes_spec_and_definition_in_one_row(dstore: Store) -> None:
    assert dstore.dynamic.upsert(definition()) == "created"
    dt = dstore.dynamic.get("lake.db.daily")
    assert dt.state == "CREATING"
    assert dt.consecutive_failures == 0
    assert dt.definition.formatters == {"day": "yyyy-MM-dd"}
    spec = dstore.tables.get("lake.db.daily")  # the maintenance-side view, for the DAG factory
    assert spec.enabled_actions() == ["refresh"]
    assert spec.actions["refresh"]["interval"] == "0 * * * *"
    assert [d.id for d in dstore.dynamic.list()] == ["lake.db.daily"]
    assert dstore.dynamic.upsert(definition()) == "unchanged"


def test_upsert_keeps_state_and_counts_when_the_definition_changes(dstore: Store) -> None:
    dstore.dynamic.upsert(definition(), state="ACTIVE")
    dstore.dynamic.record_result("lake.db.daily", success=False, scheduled=True, reason="boom")
    assert dstore.dynamic.upsert(definition(freshness="5 MINUTE")) == "updated"
    dt = dstore.dynamic.get("lake.db.daily")
    assert (dt.state, dt.consecutive_failures, str(dt.definition.freshness)) == ("ACTIVE", 1, "5 MINUTE")
    assert dstore.tables.get("lake.db.daily").actions["refresh"]["interval"] == "*/5 * * * *"


def test_plain_table_is_not_a_dynamic_table(dstore: Store) -> None:
    dstore.tables.upsert(TableSpec(catalog="lake", namespace="db", name="plain"), Owner.STORE)
    with pytest.raises(NotADynamicTable, match="plain table"):
        dstore.dynamic.upsert(definition("plain"))
    with pytest.raises(NotADynamicTable, match="not a dynamic table"):
        dstore.dynamic.get("lake.db.plain")
    assert dstore.dynamic.list() == []
    with pytest.raises(TableNotFound, match="dynamic table lake.db.nope is not registered"):
        dstore.dynamic.get("lake.db.nope")


def test_code_owned_table_refuses_store_writer(dstore: Store) -> None:
    dstore.dynamic.upsert(definition(), Owner.CODE)
    with pytest.raises(TableManagedByCode):
        dstore.dynamic.upsert(definition(freshness="1 DAY"), Owner.STORE)
    assert dstore.dynamic.get("lake.db.daily").managed_by == Owner.CODE


def test_set_state_is_guarded_by_the_expected_state(dstore: Store) -> None:
    dstore.dynamic.upsert(definition(), state="ACTIVE")
    dt = dstore.dynamic.set_state("lake.db.daily", "SUSPENDED", expected=("ACTIVE",), reason="by hand")
    assert (dt.state, dt.suspended_reason) == ("SUSPENDED", "by hand")
    with pytest.raises(DynamicStateChanged, match="is SUSPENDED; expected ACTIVE"):
        dstore.dynamic.set_state("lake.db.daily", "SUSPENDED", expected=("ACTIVE",))
    dt = dstore.dynamic.set_state(
        "lake.db.daily", "ACTIVE", expected=("SUSPENDED",), dynamic_options={"k": "v"}, reset_failures=True
    )
    assert (dt.state, dt.suspended_reason, dt.dynamic_options) == ("ACTIVE", None, {"k": "v"})


def test_state_changes_do_not_touch_updated_at(dstore: Store) -> None:
    """The DAG file and the declarations sync key their caches on updated_at: a refresh outcome
    changes no DAG, so it must not invalidate them."""
    dstore.dynamic.upsert(definition(), state="ACTIVE")
    before = dstore.tables.fingerprint()
    dstore.dynamic.record_result("lake.db.daily", success=False, scheduled=True)
    dstore.dynamic.set_state("lake.db.daily", "SUSPENDED")
    assert dstore.tables.fingerprint() == before


def test_record_result_suspends_after_n_scheduled_failures(dstore: Store) -> None:
    dstore.dynamic.upsert(definition(**{"suspend-after-failures": 3}), state="ACTIVE")
    tid = "lake.db.daily"
    dstore.dynamic.record_result(tid, success=False, scheduled=True, reason="e1")
    dstore.dynamic.record_result(tid, success=False, scheduled=False, reason="manual")  # not counted
    dt = dstore.dynamic.record_result(tid, success=False, scheduled=True, reason="e2")
    assert (dt.state, dt.consecutive_failures) == ("ACTIVE", 2)
    dt = dstore.dynamic.record_result(tid, success=False, scheduled=True, reason="table not found: src")
    assert dt.state == "SUSPENDED"
    assert dt.consecutive_failures == 3
    assert "3 consecutive failed scheduled refreshes" in (dt.suspended_reason or "")
    assert "table not found: src" in (dt.suspended_reason or "")


def test_success_resets_count_and_activates_a_creating_table(dstore: Store) -> None:
    dstore.dynamic.upsert(definition())
    tid = "lake.db.daily"
    dstore.dynamic.record_result(tid, success=False, scheduled=True)
    dt = dstore.dynamic.record_result(tid, success=True, scheduled=False)
    assert (dt.state, dt.consecutive_failures) == ("ACTIVE", 0)


def test_concurrent_failures_are_all_counted(dstore: Store, race: Race, backend: object) -> None:
    dstore.dynamic.upsert(definition(**{"suspend-after-failures": 100}), state="ACTIVE")
    results = race(8, lambda i: dstore.dynamic.record_result("lake.db.daily", success=False, scheduled=True))
    assert not [r for r in results if isinstance(r, Exception)], results
    assert dstore.dynamic.get("lake.db.daily").consecutive_failures == 8


def test_delete_soft_deletes_and_upsert_revives(dstore: Store) -> None:
    dstore.dynamic.upsert(definition(), state="ACTIVE")
    dstore.dynamic.record_result("lake.db.daily", success=False, scheduled=True)
    dstore.dynamic.delete("lake.db.daily")
    assert dstore.dynamic.find("lake.db.daily") is None
    with pytest.raises(TableNotFound, match="removed"):
        dstore.dynamic.get("lake.db.daily")
    assert dstore.dynamic.upsert(definition()) == "created"
    dt = dstore.dynamic.get("lake.db.daily")
    assert (dt.state, dt.consecutive_failures) == ("CREATING", 0)


def test_downstream_table_lists_its_upstream_on_the_refresh_action(dstore: Store) -> None:
    dstore.dynamic.upsert(definition("up"), state="ACTIVE")
    down = DynamicTableSpec.model_validate(
        {"identifier": "lake.db.down", "query": "SELECT * FROM lake.db.up", "freshness": "downstream"}
    )
    dstore.dynamic.upsert(down)
    refresh = dstore.tables.get("lake.db.down").actions["refresh"]
    assert refresh["trigger"] == "upstream"
    assert refresh["upstream"] == ["lake.db.up"]
