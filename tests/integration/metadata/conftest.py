"""A shared in-process SparkSession with an Iceberg hadoop catalog ``meta`` on a tmp warehouse."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from airflow_tablemgmt.core.tables import CatalogSpec
from tests.integration.iceberg_session import IcebergTables, iceberg_tables

CATALOG = "meta"


@pytest.fixture(scope="session")
def meta_catalog(tmp_path_factory: pytest.TempPathFactory) -> CatalogSpec:
    return CatalogSpec(name=CATALOG, warehouse=str(tmp_path_factory.mktemp("meta-warehouse")))


@pytest.fixture(scope="session")
def meta_tables(meta_catalog: CatalogSpec) -> Iterator[IcebergTables]:
    yield from iceberg_tables(meta_catalog)
