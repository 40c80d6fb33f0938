"""A dynamic table's recorded incremental analysis (issue 41) on SQLite and PostgreSQL: a runtime field of
the dynamic document, kept across state changes and a definition change that keeps the query, forgotten when
the query changes, and written without touching ``updated_at`` (which the DAG caches key on)."""

from __future__ import annotations

import pytest

from airflow_tablemgmt.core.tables import CatalogSpec, Owner
from airflow_tablemgmt.store import Store
from tests.integration.store.test_store_dynamic import definition

pytestmark = pytest.mark.integration

T = "lake.db.daily"
ANALYSIS = {"incremental": False, "strategy": None, "reason": "it uses LIMIT", "construct": "LIMIT"}


def test_the_analysis_is_kept_until_the_query_changes(store: Store) -> None:
    store.catalogs.upsert(CatalogSpec(name="lake", warehouse="/tmp/w"), Owner.STORE)
    store.dynamic.upsert(definition())
    assert store.dynamic.get(T).incremental is None
    before = store.dynamic.get(T).updated_at
    dt = store.dynamic.set_analysis(T, ANALYSIS)
    assert dt.incremental == ANALYSIS and dt.updated_at == before
    assert store.dynamic.get(T).to_dict()["incremental"] == ANALYSIS
    store.dynamic.record_result(T, success=True, scheduled=True)  # CREATING -> ACTIVE
    store.dynamic.upsert(definition(freshness="1 DAY"))
    assert (store.dynamic.get(T).state, store.dynamic.get(T).incremental) == ("ACTIVE", ANALYSIS)
    store.dynamic.upsert(definition(query="SELECT id, day FROM lake.db.other"))
    assert store.dynamic.get(T).incremental is None
