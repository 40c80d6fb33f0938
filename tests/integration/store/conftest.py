"""One store behaviour suite, run against SQLite (a temp file) and a real PostgreSQL.

The ``store`` fixture is parametrized by backend, as pyiceberg runs its catalog suite against
every catalog. Each PostgreSQL test gets a fresh schema (reached through ``search_path``), so
tests never see each other's rows. PostgreSQL is expected at ``TABLEMGMT_TEST_POSTGRES_URL``
(default ``postgresql+psycopg2://postgres@127.0.0.1:5432/test``): unreachable, its tests are
skipped locally and fail when ``CI=true``.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pytest
from sqlalchemy import Engine, text

from airflow_tablemgmt.store import Store
from tests.support.postgres import PG_URL, admin_engine

# A session time zone far from UTC, so a missed conversion shows up as a wrong timestamp.
PG_TIMEZONE = "Asia/Kolkata"


@dataclass
class Backend:
    """Where a test's store lives; ``store()`` opens another, independent ``Store`` on it."""

    name: str
    url: str
    engine_kwargs: dict[str, Any] = field(default_factory=dict)
    _opened: list[Store] = field(default_factory=list)

    def store(self, *, auto_upgrade: bool = True) -> Store:
        store = Store(self.url, auto_upgrade=auto_upgrade, engine_kwargs=self.engine_kwargs)
        self._opened.append(store)
        return store

    def close(self) -> None:
        for store in self._opened:
            store.dispose()


@pytest.fixture(scope="session")
def postgres_admin() -> Iterator[Engine]:
    yield from admin_engine("the store suite")


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Backend]:
    if request.param == "sqlite":
        b = Backend("sqlite", f"sqlite:///{tmp_path / 'tablemgmt.db'}")
        yield b
        b.close()
        return
    admin: Engine = request.getfixturevalue("postgres_admin")
    schema = f"tms_t_{uuid.uuid4().hex[:16]}"
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    options = f"-csearch_path={schema} -cTimeZone={PG_TIMEZONE}"
    b = Backend("postgresql", PG_URL, {"connect_args": {"options": options}})
    try:
        yield b
    finally:
        b.close()
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))


@pytest.fixture
def store(backend: Backend) -> Store:
    return backend.store()


Race = Callable[[int, Callable[[int], Any]], list[Any]]


@pytest.fixture
def race() -> Race:
    """Run ``fn(i)`` for i in range(n) on n threads released together; results or exceptions."""

    def run(n: int, fn: Callable[[int], Any]) -> list[Any]:
        barrier = threading.Barrier(n)

        def call(i: int) -> Any:
            barrier.wait(timeout=30)
            try:
                return fn(i)
            except Exception as e:  # collected: the test asserts on winners and losers
                return e

        with ThreadPoolExecutor(max_workers=n) as pool:
            return list(pool.map(call, range(n)))

    return run
