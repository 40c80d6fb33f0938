"""What the catalog suites share: a PostgreSQL database of their own for a JDBC catalog (SeaweedFS's S3
gateway, ``s3``, comes from ``tests/integration/conftest.py``)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from tests.integration.iceberg_session import skip_unless_ci

PG_ADMIN = os.environ.get("TABLEMGMT_TEST_POSTGRES_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/test")


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
