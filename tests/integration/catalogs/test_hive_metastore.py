"""A Hive catalog against a real Hive Metastore (thrift, Derby-backed, from the Hive jars pyspark ships),
started here: pyiceberg's HiveCatalog writes the table, the product's reader (gate, watchers) reads its
snapshots through the metastore, and a real spark-submit compacts it through Spark's HiveCatalog.

On demand (``TABLEMGMT_CATALOG_MATRIX=1``, ``-m catalog_matrix``): the metastore's start-up (≈ 45 s on 2
busy cores) and one Spark job are kept out of CI's 30 minutes; REST and JDBC represent the catalogs there.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_tablemgmt.core.tables import CatalogSpec, CatalogType
from airflow_tablemgmt.hooks.secrets import resolve_catalog_spec
from airflow_tablemgmt.metadata.iceberg import SnapshotReader
from tests.support.catalogs import content, run, seed
from tests.support.servers import HiveMetastore

pytestmark = [
    pytest.mark.integration,
    pytest.mark.catalog_matrix,
    pytest.mark.skipif(
        os.environ.get("TABLEMGMT_CATALOG_MATRIX") != "1",
        reason="the Hive Metastore runs with TABLEMGMT_CATALOG_MATRIX=1",
    ),
]


@pytest.fixture(scope="module")
def metastore(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HiveMetastore]:
    pytest.importorskip("thrift", reason="pyiceberg's HiveCatalog needs the [hive] extra")
    with HiveMetastore(tmp_path_factory.mktemp("hms")) as server:
        yield server


@pytest.fixture(scope="module")
def hive(metastore: HiveMetastore, tmp_path_factory: pytest.TempPathFactory) -> CatalogSpec:
    os.environ.setdefault("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "local[2]"}')
    warehouse: Path = tmp_path_factory.mktemp("hive-warehouse")
    return CatalogSpec(
        name="hivelake",
        type=CatalogType.HIVE,
        warehouse=f"file://{warehouse}",
        properties={"uri": metastore.uri},
    )


@pytest.mark.timeout(900)
def test_compaction_through_a_real_hive_metastore(hive: CatalogSpec) -> None:
    table = seed(hive, f"hms_{uuid.uuid4().hex[:6]}", appends=4)
    rows, checksum, files, _ = content(hive, table)
    assert files == 4
    reader = SnapshotReader(resolve_catalog_spec(hive))
    before = reader.current_state(table)
    assert before.snapshot_id is not None

    result = run(hive, table, "rewrite-files", {"min-input-files": 2})

    assert result.summary["before"]["data_files"] == 4 and result.summary["after"]["data_files"] == 1
    assert content(hive, table)[:3] == (rows, checksum, 1)
    reader.forget()
    after = reader.current_state(table)
    assert after.snapshot_id == result.summary["after"]["current_snapshot_id"] != before.snapshot_id
    assert not after.data_changed_since(before.snapshot_id)
