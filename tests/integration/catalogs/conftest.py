"""What the catalog suites share: SeaweedFS's S3 gateway per module, and a PostgreSQL database of their own
for a JDBC catalog."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.integration.iceberg_session import skip_unless_ci
from tests.support.servers import SeaweedS3

PG_ADMIN = os.environ.get("TABLEMGMT_TEST_POSTGRES_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/test")


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedS3]:
    try:
        server = SeaweedS3(tmp_path_factory.mktemp("seaweed")).start()
    except RuntimeError as e:
        skip_unless_ci(f"SeaweedFS could not start: {e}")
    yield server
    server.stop()


@contextmanager
def postgres_database(prefix: str) -> Iterator[str]:
    """A new database on the suite's PostgreSQL (dropped afterwards); skipped outside CI when unreachable."""
    from sqlalchemy import create_engine, text

    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as c:
            c.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as e:  # noqa: BLE001
        skip_unless_ci(f"PostgreSQL is not reachable at {PG_ADMIN} (make services): {e}")
    try:
        yield name
    finally:
        with admin.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
