"""A per-host SQLite store is refused when Airflow's executor runs tasks on several hosts (item 12),
and the store URL is a secret: a sensitive connection field, masked in logs (item 13)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.e2e.conftest import BIN

pytestmark = pytest.mark.e2e


def cli_env(tmp_path: Path, **env: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in ("TABLEMGMT_STORE_URL",)}
    base = {k: v for k, v in base.items() if not k.startswith("AIRFLOW_CONN_TABLEMGMT")}
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {**base, "AIRFLOW_HOME": str(home), "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", **env}


def tablemgmt(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "tablemgmt"), *args], capture_output=True, text=True, env=env, timeout=180
    )


def test_default_sqlite_store_is_refused_under_celery_and_says_how_to_configure_postgres(
    tmp_path: Path,
) -> None:
    env = cli_env(tmp_path, AIRFLOW__CORE__EXECUTOR="CeleryExecutor")
    for command in (["register", "lake.s.t", "--warehouse", "/wh"], ["run", "lake.s.t", "rewrite-files"]):
        res = tablemgmt(env, *command)
        assert res.returncode == 2, res.stderr
        assert "Traceback" not in res.stderr
        err = res.stderr
        assert "error: the tablemgmt store is a SQLite file on this host" in err
        assert "CeleryExecutor" in err and "no tablemgmt_default connection" in err
        assert "airflow connections add tablemgmt_default --conn-type tablemgmt" in err
        assert "AIRFLOW_CONN_TABLEMGMT_DEFAULT='postgresql+psycopg2://" in err
        assert "allow_local_sqlite" in err
    assert not (tmp_path / "home" / "tablemgmt.db").exists()  # nothing was created on this host


def test_explicit_sqlite_connection_needs_allow_local_sqlite_under_a_multi_host_executor(
    tmp_path: Path,
) -> None:
    db = tmp_path / "shared" / "tablemgmt.db"
    conn = {"conn_type": "tablemgmt", "extra": {"dsn": f"sqlite:///{db}"}}
    executor = "LocalExecutor,CeleryExecutor"  # a comma list: any remote executor counts
    env = cli_env(tmp_path, AIRFLOW__CORE__EXECUTOR=executor, AIRFLOW_CONN_TABLEMGMT_DEFAULT=json.dumps(conn))
    res = tablemgmt(env, "db", "upgrade")
    assert res.returncode == 2 and "from connection tablemgmt_default" in res.stderr, res.stderr
    assert not db.exists()

    conn["extra"]["allow_local_sqlite"] = True
    env["AIRFLOW_CONN_TABLEMGMT_DEFAULT"] = json.dumps(conn)
    res = tablemgmt(env, "db", "upgrade")
    assert res.returncode == 0, res.stderr
    assert db.exists()


def test_single_host_executors_keep_the_embedded_sqlite_default(tmp_path: Path) -> None:
    from airflow_tablemgmt.hooks.tablemgmt import SharedStoreRequired, StoreLocation, check_shared_store

    local = StoreLocation(f"sqlite:///{tmp_path}/t.db", "default")
    for executors in (["LocalExecutor"], ["SequentialExecutor"], ["DebugExecutor"]):
        check_shared_store(local, executors)  # no error
    for executors in (["CeleryExecutor"], ["KubernetesExecutor"], ["LocalExecutor", "EdgeExecutor"]):
        with pytest.raises(SharedStoreRequired):
            check_shared_store(local, executors)
    check_shared_store(StoreLocation("postgresql+psycopg2://u@h/db", "default"), ["CeleryExecutor"])


def test_executor_names_are_read_from_aliases_paths_and_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_tablemgmt.hooks.tablemgmt import configured_executors

    monkeypatch.setenv(
        "AIRFLOW__CORE__EXECUTOR",
        "LocalExecutor, my_celery:airflow.providers.celery.executors.celery_executor.CeleryExecutor",
    )
    assert configured_executors() == ["LocalExecutor", "CeleryExecutor"]


def test_the_store_url_is_a_sensitive_field_and_its_password_is_masked_in_logs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from airflow.providers_manager import ProvidersManager
    from airflow.sdk._shared.secrets_masker import should_hide_value_for_key
    from airflow.sdk.log import mask_logs

    from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook

    widget = ProvidersManager().connection_form_widgets["extra__tablemgmt__dsn"]
    assert widget.is_sensitive  # a password input in the connection form
    assert should_hide_value_for_key("dsn")  # redacted in the REST API's `extra`

    url = "postgresql+psycopg2://tms:Pw4Store9x@db.example:5432/tablemgmt"
    conn = {"conn_type": "tablemgmt", "extra": {"dsn": url}}
    monkeypatch.setenv("AIRFLOW_CONN_TABLEMGMT_DEFAULT", json.dumps(conn))
    assert TableMgmtHook().get_store_url() == url
    logged = mask_logs(None, "info", {"event": f"opening {url} as tms with Pw4Store9x"})["event"]
    assert "Pw4Store9x" not in logged and "***" in logged


def test_older_connection_forms_still_work(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook

    legacy = {"conn_type": "tablemgmt", "extra": {"url": "postgresql+psycopg2://u@h:5432/a"}}
    monkeypatch.setenv("AIRFLOW_CONN_TABLEMGMT_DEFAULT", json.dumps(legacy))
    assert TableMgmtHook().get_store_url() == "postgresql+psycopg2://u@h:5432/a"

    # The password may live in the connection's (always redacted) password field.
    split = {
        "conn_type": "tablemgmt",
        "password": "p@ss",
        "extra": {"dsn": "postgresql+psycopg2://u@h:5432/a"},
    }
    monkeypatch.setenv("AIRFLOW_CONN_TABLEMGMT_DEFAULT", json.dumps(split))
    assert TableMgmtHook().get_store_url() == "postgresql+psycopg2://u:p%40ss@h:5432/a"

    # A plain database URI as the connection.
    monkeypatch.setenv("AIRFLOW_CONN_TABLEMGMT_DEFAULT", "postgresql+psycopg2://u:pw@h:5432/a")
    location = TableMgmtHook().locate_store()
    assert location.url == "postgresql+psycopg2://u:pw@h:5432/a"
    assert location.source == "connection tablemgmt_default"
