"""Opening a store: files created private, read-only opens that never create, clear errors for bad URLs,
missing drivers, unwritable paths and unreachable servers (never the password)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from airflow_tablemgmt.core.errors import TableMgmtError
from airflow_tablemgmt.store import Store
from airflow_tablemgmt.store.errors import StoreNotFound, StoreUnavailable

pytestmark = pytest.mark.integration


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_new_sqlite_store_file_is_0600_and_the_directories_it_creates_0700(tmp_path: Path) -> None:
    old = os.umask(0o022)  # the usual umask would otherwise leave the file world-readable
    try:
        db = tmp_path / "new" / "deeper" / "tablemgmt.db"
        store = Store(f"sqlite:///{db}")
        try:
            assert store.tables.list() == []
        finally:
            store.dispose()
    finally:
        os.umask(old)
    assert _mode(db) == 0o600
    assert _mode(db.parent) == 0o700 and _mode(db.parent.parent) == 0o700
    for sidecar in db.parent.glob("tablemgmt.db-*"):  # WAL and shared-memory files follow the file
        assert _mode(sidecar) & 0o077 == 0, sidecar


def test_opening_without_create_never_creates_the_file_nor_its_directory(tmp_path: Path) -> None:
    db = tmp_path / "absent" / "tablemgmt.db"
    with pytest.raises(StoreNotFound) as e:
        Store(f"sqlite:///{db}", create=False)
    assert f"no store at {db}" in str(e.value) and "tablemgmt db upgrade" in str(e.value)
    assert not db.parent.exists()


def test_opening_an_existing_store_without_create_works(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tablemgmt.db'}"
    Store(url).upgrade()
    store = Store(url, create=False)
    try:
        assert store.tables.list() == []
    finally:
        store.dispose()


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("notaurl", ["store URL 'notaurl' is not a database URL", "postgresql+psycopg2://"]),
        ("postgresql+pg8000://u:secretpw@127.0.0.1:5432/x", ["pg8000", "pip install pg8000"]),
        ("mysql://u:secretpw@127.0.0.1:3306/x", ["pip install mysqlclient", "pymysql"]),
        ("nosuchdb://u:secretpw@h/x", ["nosuchdb", "postgresql"]),
    ],
)
def test_a_bad_url_or_a_missing_driver_is_a_clear_error(url: str, expected: list[str]) -> None:
    with pytest.raises(TableMgmtError) as e:
        Store(url)
    for text in expected:
        assert text in str(e.value), str(e.value)
    assert "secretpw" not in str(e.value)


@pytest.mark.parametrize("where", ["proc", "under-a-file"])
def test_an_unwritable_sqlite_path_is_a_clear_error(tmp_path: Path, where: str) -> None:
    if where == "proc":
        db = Path("/proc/nonexistent-tms/tm.db")
    else:
        (tmp_path / "afile").write_text("x")
        db = tmp_path / "afile" / "sub" / "tm.db"
    with pytest.raises(StoreUnavailable) as e:
        Store(f"sqlite:///{db}").tables.list()
    assert str(db) in str(e.value) and "cannot create" in str(e.value)


def test_an_unreachable_server_names_host_and_port_without_the_password() -> None:
    store = Store("postgresql+psycopg2://u:secretpw@127.0.0.1:1/x")
    try:
        with pytest.raises(StoreUnavailable) as e:
            store.ping()
    finally:
        store.dispose()
    message = str(e.value)
    assert "127.0.0.1:1" in message and "secretpw" not in message
    assert "cannot reach the store" in message
