"""Store construction, schema migrations and connection settings, on every backend."""

from __future__ import annotations

import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text

from airflow_tablemgmt.store import Store, StoreSchemaOutdated
from airflow_tablemgmt.store.engine import alembic_config
from airflow_tablemgmt.store.models import SCHEMA_REVISION, VERSION_TABLE, Base

pytestmark = pytest.mark.integration

TMS_TABLES = {"tms_catalog", "tms_table", "tms_process", "tms_lease", VERSION_TABLE}


def test_upgrade_is_idempotent_and_reports_revision(backend):
    store = backend.store(auto_upgrade=False)
    assert store.current_revision() is None

    store.upgrade()
    assert store.current_revision() == Store.head_revision() == SCHEMA_REVISION
    store.upgrade()
    assert store.current_revision() == SCHEMA_REVISION

    names = set(inspect(store.engine).get_table_names())
    assert TMS_TABLES <= names
    assert "alembic_version" not in names  # never collides with Airflow's own version table


def test_schema_revision_names_the_newest_migration():
    assert ScriptDirectory.from_config(alembic_config()).get_current_head() == SCHEMA_REVISION


def test_schema_is_applied_on_first_use(backend):
    store = backend.store()
    assert store.tables.list() == []
    assert store.current_revision() == Store.head_revision()


def test_without_auto_upgrade_an_empty_database_is_refused_clearly(backend):
    store = backend.store(auto_upgrade=False)
    with pytest.raises(
        StoreSchemaOutdated, match=f"schema revision none, this package needs {SCHEMA_REVISION}"
    ):
        store.tables.list()


def test_migration_creates_exactly_what_the_models_declare(store):
    store.upgrade()
    with store.engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
        assert compare_metadata(ctx, Base.metadata) == []


def test_stores_racing_to_create_a_fresh_schema_all_succeed(backend, race):
    stores = [backend.store() for _ in range(6)]  # one engine each: separate connections
    assert race(6, lambda i: stores[i].tables.list()) == [[]] * 6
    assert backend.store(auto_upgrade=False).current_revision() == SCHEMA_REVISION


# Imports, reports ready, waits for "go", then uses (and so creates) the store.
_FIRST_USE = """
import pathlib, sys, time
from airflow_tablemgmt.store import Store
url, flags, me = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3]
store = Store(url)
(flags / f"ready-{me}").touch()
while not (flags / "go").exists():
    time.sleep(0.005)
assert store.tables.list() == []
print(store.current_revision())
"""


def test_processes_racing_to_create_a_fresh_sqlite_file_all_succeed(tmp_path):
    url = f"sqlite:///{tmp_path / 'tablemgmt.db'}"
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _FIRST_USE, url, str(tmp_path), str(i)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("ready-*"))) < len(children) and time.monotonic() < deadline:
        time.sleep(0.01)
    (tmp_path / "go").touch()
    for child in children:
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
        assert out.strip() == SCHEMA_REVISION


def test_default_url_lives_under_airflow_home(monkeypatch, tmp_path):
    assert Store.default_url(str(tmp_path)) == f"sqlite:///{tmp_path}/tablemgmt.db"
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "home"))
    assert Store.default_url() == f"sqlite:///{tmp_path}/home/tablemgmt.db"
    monkeypatch.delenv("AIRFLOW_HOME")
    assert Store.default_url() == f"sqlite:///{Path('~/airflow').expanduser().resolve()}/tablemgmt.db"


def test_sqlite_store_creates_its_directory_and_uses_wal(tmp_path):
    store = Store(Store.default_url(str(tmp_path / "missing" / "dir")))
    try:
        store.tables.list()
        with store.engine.connect() as conn:
            assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
            assert conn.execute(text("PRAGMA busy_timeout")).scalar() == 30_000
        assert (tmp_path / "missing" / "dir" / "tablemgmt.db").exists()
    finally:
        store.dispose()


def test_for_url_returns_one_store_per_url(tmp_path):
    url = f"sqlite:///{tmp_path / 'a.db'}"
    try:
        first = Store.for_url(url)
        assert Store.for_url(url) is first
        assert Store.for_url(f"sqlite:///{tmp_path / 'b.db'}") is not first
    finally:
        Store.clear_cache()
    assert Store.for_url(url) is not first
    Store.clear_cache()


def test_in_memory_sqlite_is_one_database_for_every_thread():
    store = Store("sqlite://")
    store.leases.acquire("c.n.t", "main", timedelta(minutes=1))
    with ThreadPoolExecutor(max_workers=1) as pool:
        lease = pool.submit(store.leases.get, "c.n.t").result()
    assert lease is not None and lease.holder == "main"
