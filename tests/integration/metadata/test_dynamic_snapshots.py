"""The NO_DATA decision (``metadata.dynamic``) against real Iceberg tables: the snapshots a Spark refresh
records are the ones pyiceberg reads back; a commit to a source is new data, none is not, and a
compaction (a ``replace`` snapshot) is not new data either."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from airflow_tablemgmt.core.errors import CatalogNotFound, InvalidIdentifier, TableNotFound
from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.metadata.dynamic import (
    SourceCheck,
    check_sources,
    current_snapshots,
    current_states,
    has_new_data,
    reader_for,
)
from airflow_tablemgmt.spark.job.refresh import refresh
from tests.integration.iceberg_session import NAMESPACE

if TYPE_CHECKING:
    from tests.integration.iceberg_session import IcebergTables

pytestmark = pytest.mark.integration

_names = itertools.count()


def test_a_commit_to_a_source_is_new_data_and_none_is_not(
    meta_tables: IcebergTables, meta_catalog: CatalogSpec
) -> None:
    orders = meta_tables.create("orders", rows=3)
    empty = meta_tables.create("returns", rows=0)
    dt = TableIdentifier(meta_catalog.name, NAMESPACE, f"nodata_dt_{next(_names)}")
    query = f"SELECT o.id, o.v FROM {orders} o LEFT JOIN {empty} r ON o.id = r.id"
    summary = refresh(meta_tables.spark, dt, {"mode": "create", "query": query})
    recorded = summary["source_snapshots"]
    assert recorded == {str(orders): meta_tables.snapshot_id(orders), str(empty): None}

    # Recorded by Spark, read back by pyiceberg: the same ids, so nothing new.
    current = current_snapshots([meta_catalog], recorded)
    assert current == recorded
    assert has_new_data(recorded, current) is False
    assert check_sources({meta_catalog.name: meta_catalog}, recorded).has_new_data is False
    # As the store hands them back after JSON (ids may come as strings): still nothing new.
    as_json = json.loads(json.dumps({k: None if v is None else str(v) for k, v in recorded.items()}))
    assert has_new_data(as_json, current) is False

    newer = meta_tables.insert(orders)
    current = current_snapshots([meta_catalog], recorded)
    assert current[str(orders)] == newer != recorded[str(orders)]
    assert has_new_data(recorded, current) is True
    check = check_sources([meta_catalog], recorded)
    assert (check.has_new_data, check.snapshots) == (True, current)

    # The first commit to a source that had no snapshot is new data too.
    meta_tables.insert(empty)
    after_refresh = {str(orders): newer, str(empty): None}
    assert has_new_data(after_refresh, current_snapshots([meta_catalog], recorded)) is True


def test_a_compaction_of_a_source_is_not_new_data(
    meta_tables: IcebergTables, meta_catalog: CatalogSpec
) -> None:
    src = meta_tables.create("compacted", rows=2)
    meta_tables.insert(src, rows=2)  # two files to rewrite into one
    recorded = {str(src): meta_tables.snapshot_id(src)}
    meta_tables.spark.sql(
        f"CALL {meta_catalog.name}.system.rewrite_data_files(table => '{NAMESPACE}.{src.name}', "
        "options => map('min-input-files', '2'))"
    )
    states = current_states([meta_catalog], recorded)
    current = {t: s.snapshot_id for t, s in states.items()}
    assert current != recorded  # a new (replace) snapshot ...
    assert has_new_data(recorded, current) is True  # ... which ids alone cannot tell from new data
    assert has_new_data(recorded, current, states) is False
    assert check_sources([meta_catalog], recorded) == SourceCheck(False, current)

    meta_tables.insert(src)  # an append after the compaction is new data
    assert check_sources([meta_catalog], recorded).has_new_data is True


def test_decision_rules_without_tables() -> None:
    assert has_new_data(None, {"c.n.a": 1}) is True  # never refreshed
    assert has_new_data({}, {}) is True  # no source: the query may depend on the clock
    assert has_new_data({"c.n.a": 1}, {"c.n.a": 1, "c.n.b": 2}) is True  # the query now reads another table
    assert has_new_data({"c.n.a": 1, "c.n.b": 2}, {"c.n.a": 1}) is True
    assert has_new_data({"c.n.a": "7", "c.n.b": None}, {"c.n.a": 7, "c.n.b": None}) is False
    assert has_new_data({"c.n.a": 7}, {"c.n.a": None}) is True  # the table lost its snapshots (replaced)


def test_unreadable_sources_are_named(meta_tables: IcebergTables, meta_catalog: CatalogSpec) -> None:
    with pytest.raises(
        CatalogNotFound,
        match=r"source table other\.db\.t: catalog 'other' is not registered; registered: meta",
    ):
        current_snapshots([meta_catalog], ["other.db.t"])
    with pytest.raises(TableNotFound, match=r"table meta\.db\.no_such_table"):
        current_snapshots([meta_catalog], ["meta.db.no_such_table"])
    with pytest.raises(InvalidIdentifier, match="must be written catalog.namespace.table"):
        current_snapshots([meta_catalog], ["db.t"])
    # One reader per catalog for the process; a catalog whose settings change gets a new one.
    assert reader_for(meta_catalog) is reader_for(meta_catalog.model_copy())
    moved = meta_catalog.model_copy(update={"warehouse": meta_catalog.warehouse + "-moved"})
    assert reader_for(moved) is not reader_for(meta_catalog)


def test_the_decision_needs_no_jvm(meta_tables: IcebergTables, meta_catalog: CatalogSpec) -> None:
    src = meta_tables.create("nojvm", rows=1)
    program = (
        "import json, sys\n"
        "from airflow_tablemgmt.core.tables import CatalogSpec\n"
        "from airflow_tablemgmt.metadata.dynamic import current_snapshots\n"
        f"catalog = CatalogSpec.model_validate_json({meta_catalog.model_dump_json()!r})\n"
        f"print(json.dumps([current_snapshots([catalog], [{str(src)!r}]), 'pyspark' in sys.modules, 'py4j' in sys.modules]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", program], check=True, capture_output=True, text=True, timeout=120
    )
    snapshots, pyspark_loaded, py4j_loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert snapshots == {str(src): meta_tables.snapshot_id(src)}
    assert (pyspark_loaded, py4j_loaded) == (False, False)
