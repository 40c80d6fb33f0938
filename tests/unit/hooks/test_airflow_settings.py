"""Settings read from airflow.cfg without importing Airflow: the parsed file is kept until it changes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from airflow_tablemgmt.hooks import airflow_settings


@pytest.fixture()
def cfg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "airflow.cfg"
    monkeypatch.setenv("AIRFLOW_CONFIG", str(path))
    monkeypatch.delenv("AIRFLOW__METRICS__STATSD_ON", raising=False)
    return path


def test_a_changed_config_file_is_read_again(cfg: Path) -> None:
    cfg.write_text("[metrics]\nstatsd_on = False\n")
    assert not airflow_settings.metrics_may_be_on()
    assert airflow_settings.setting("metrics", "statsd_on") == "False"
    cfg.write_text("[metrics]\nstatsd_on = True\n")
    st = cfg.stat()
    os.utime(cfg, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # a different mtime even within one tick
    assert airflow_settings.metrics_may_be_on()


def test_the_file_is_parsed_once_while_it_is_unchanged(cfg: Path) -> None:
    cfg.write_text("[tablemgmt]\njvm_class_cache = false\n")
    first = airflow_settings._config_file()
    assert first is airflow_settings._config_file()
    assert airflow_settings.setting("tablemgmt", "jvm_class_cache") == "false"


def test_no_config_file_means_nothing_is_set(cfg: Path) -> None:
    assert airflow_settings.setting("secrets", "backend") is None
    assert not airflow_settings.secrets_backend_may_be_configured()


def test_a_cmd_form_is_unknown(cfg: Path) -> None:
    cfg.write_text("[secrets]\nbackend_cmd = cat /etc/backend\n")
    assert airflow_settings.setting("secrets", "backend") == airflow_settings.UNKNOWN
