"""A shared in-process SparkSession with an Iceberg hadoop catalog ``trig`` on a tmp warehouse."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from airflow_tablemgmt.core.tables import CatalogSpec
from tests.integration.iceberg_session import IcebergTables, iceberg_tables

CATALOG = "trig"


@pytest.fixture(scope="session")
def trig_catalog(tmp_path_factory: pytest.TempPathFactory) -> CatalogSpec:
    return CatalogSpec(name=CATALOG, warehouse=str(tmp_path_factory.mktemp("trig-warehouse")))


@pytest.fixture(scope="session")
def trig_tables(trig_catalog: CatalogSpec) -> Iterator[IcebergTables]:
    yield from iceberg_tables(trig_catalog)
