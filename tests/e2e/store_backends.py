"""The store an API test runs against: a SQLite file, or a fresh schema of a real PostgreSQL (the
production store), reached through ``search_path`` in the URL so the api-server's own hook opens it.

PostgreSQL is expected at ``TABLEMGMT_TEST_POSTGRES_URL`` (default the one ``make services`` starts);
unreachable, its tests are skipped locally and fail when ``CI=true`` (as the store suite does).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.postgres import PG_URL

BACKENDS = ["sqlite", "postgresql"]


def _pg_admin():  # type: ignore[no-untyped-def]
    from tests.support.postgres import reachable_admin

    return reachable_admin("the API tests")


@contextmanager
def store_url(backend: str, tmp: Path) -> Iterator[str]:
    """A store URL of ``backend``, empty, and set as ``TABLEMGMT_STORE_URL`` (restored after)."""
    from sqlalchemy import text

    before = os.environ.get("TABLEMGMT_STORE_URL")
    admin = schema = None
    if backend == "sqlite":
        url = f"sqlite:///{tmp / 'api-store.db'}"
    else:
        admin = _pg_admin()
        schema = f"tms_api_{uuid.uuid4().hex[:12]}"
        with admin.begin() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        url = f"{PG_URL}?options=-csearch_path%3D{schema}"
    os.environ["TABLEMGMT_STORE_URL"] = url
    try:
        yield url
    finally:
        if before is None:
            os.environ.pop("TABLEMGMT_STORE_URL", None)
        else:
            os.environ["TABLEMGMT_STORE_URL"] = before
        if admin is not None:
            with admin.begin() as conn:
                conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
            admin.dispose()
