"""What the package contains is what ``get_provider_info()`` declares: every module defining an operator,
sensor, trigger or hook, every ``[tablemgmt]`` option the code reads (with defaults that mean what the
code does when the option is unset), and the ``tablemgmt://`` asset URI normalizer."""

from __future__ import annotations

import importlib
import inspect
import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import airflow_tablemgmt
from airflow_tablemgmt.provider_config import OPTIONS
from airflow_tablemgmt.provider_info import get_provider_info

PACKAGE = Path(airflow_tablemgmt.__file__).parent
# Every way the package reads an option of the section: setting_or_airflow("tablemgmt", "x"),
# conf.get("tablemgmt", "x"), conf.getint(\n "tablemgmt", "x", ...) ...
_OPTION_READ = re.compile(r"\(\s*\"tablemgmt\"\s*,\s*\"([a-z_]+)\"")


def _declared_modules(section: str) -> set[str]:
    return {m for entry in get_provider_info().get(section, []) for m in entry["python-modules"]}


def _modules_defining(folder: str, base: type, exclude: tuple[type, ...] = ()) -> set[str]:
    """Modules under ``airflow_tablemgmt/<folder>`` that define a public subclass of ``base``."""
    found = set()
    for path in sorted((PACKAGE / folder).glob("*.py")):
        name = f"airflow_tablemgmt.{folder}.{path.stem}"
        module = importlib.import_module(name)
        for cls_name, cls in inspect.getmembers(module, inspect.isclass):
            if (
                cls.__module__ == name
                and not cls_name.startswith("_")
                and issubclass(cls, base)
                and not issubclass(cls, exclude)
            ):
                found.add(name)
    return found


def test_provider_info_is_valid_against_airflows_schema() -> None:
    import airflow

    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    jsonschema.validate(get_provider_info(), schema)


def test_every_operator_sensor_trigger_and_hook_module_is_declared() -> None:
    from airflow.sdk import BaseHook, BaseOperator, BaseSensorOperator
    from airflow.triggers.base import BaseTrigger

    assert _modules_defining("operators", BaseOperator, (BaseSensorOperator,)) == _declared_modules(
        "operators"
    )
    assert _modules_defining("sensors", BaseSensorOperator) == _declared_modules("sensors")
    assert _modules_defining("triggers", BaseTrigger) == _declared_modules("triggers")
    # Hooks: every BaseHook is declared; SparkJobHook (hooks.spark_job) wraps Airflow's SparkSubmitHook
    # rather than subclassing BaseHook, and is declared as the package's other hook.
    hooks = _declared_modules("hooks")
    assert _modules_defining("hooks", BaseHook) <= hooks
    for name in hooks:
        module = importlib.import_module(name)
        assert any(
            n.endswith("Hook") and c.__module__ == name
            for n, c in inspect.getmembers(module, inspect.isclass)
        ), name
    declared_hook = get_provider_info()["connection-types"][0]["hook-class-name"]
    module, _, cls = declared_hook.rpartition(".")
    assert issubclass(getattr(importlib.import_module(module), cls), BaseHook)


def test_every_option_read_in_the_code_is_declared_and_nothing_else() -> None:
    read = set()
    for path in PACKAGE.rglob("*.py"):
        read |= set(_OPTION_READ.findall(path.read_text(encoding="utf-8")))
    assert read, "the pattern no longer finds how the package reads its options"
    declared = set(get_provider_info()["config"]["tablemgmt"]["options"])
    assert read - declared == set(), "read in the code but not declared in provider_config.py"
    assert declared - read == set(), "declared in provider_config.py but read nowhere"


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_each_option_is_documented(name: str) -> None:
    option = OPTIONS[name]
    assert len(option["description"]) > 30
    assert option["type"] in {"string", "boolean", "integer", "float"}
    assert option["example"] not in (None, "", option["default"])
    if option["type"] == "integer":
        int(option["default"]), int(option["example"])
    if option["type"] == "boolean":
        assert {option["default"], option["example"]} <= {"True", "False"}


def _effective() -> dict[str, Any]:
    """What the code makes of the section as it finds it (environment, config file)."""
    from airflow_tablemgmt.api import user_sql
    from airflow_tablemgmt.dag_factory import build as dag_factory
    from airflow_tablemgmt.dag_factory import cache as dag_cache
    from airflow_tablemgmt.hooks import airflow_settings
    from airflow_tablemgmt.services import planning

    return {
        "jvm_class_cache": airflow_settings.jvm_class_cache_settings(),
        "artifacts": airflow_settings.artifact_settings(),
        "job_env_allow": airflow_settings.job_env_allow(),
        "dag_cache_dir": dag_cache.cache_dir(),
        "triggerers": dag_factory.triggerer_slots()[1],
        "time_limits": _time_limits(dag_factory.DagConfigDefaults.from_airflow_config()),
        "user_sql_authors": user_sql.configured_rule(),
        "plan": planning.plan_settings(),
    }


def _time_limits(config: Any) -> tuple[Any, ...]:
    from airflow_tablemgmt.core.actions import RefreshSettings
    from airflow_tablemgmt.formats.iceberg.actions import ExpireSnapshotsSettings

    refresh = RefreshSettings(interval="0 * * * *", freshness="1 HOUR", trigger="schedule")
    long = refresh.model_copy(update={"timeout": timedelta(days=2)})
    return tuple(
        config.time_limit(a, s).limit
        for a, s in (("refresh", refresh), ("refresh", long), ("expire-snapshots", ExpireSnapshotsSettings()))
    )


def test_the_declared_defaults_mean_what_the_code_does_when_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in OPTIONS:
        monkeypatch.delenv(f"AIRFLOW__TABLEMGMT__{name.upper()}", raising=False)
    unset = _effective()
    for name, option in OPTIONS.items():
        monkeypatch.setenv(f"AIRFLOW__TABLEMGMT__{name.upper()}", option["default"])
    assert _effective() == unset


def test_a_non_default_value_is_seen_by_the_code(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The premise of the test above: the code does read these names (the comparison can fail)."""
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__TRIGGERERS", "3")
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__JARS_OFFLINE", "True")
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__DAG_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__REFRESH_TIMEOUT", "30m")
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__REFRESH_TIMEOUT_MAX", "1d")
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__MAINTENANCE_TIMEOUT", "8h")
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__USER_SQL_AUTHORS", "role:op")
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__PLAN_BATCH_SIZE", "7")
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__PLAN_HEALTH_MAX_AGE", "6h")
    effective = _effective()
    h = timedelta(hours=1)
    assert effective["time_limits"] == (h / 2, 24 * h, 8 * h)
    assert effective["user_sql_authors"].roles == {"op"}
    assert effective["triggerers"] == 3
    assert effective["artifacts"].offline is True
    assert effective["dag_cache_dir"] == tmp_path
    assert effective["plan"] == (7, 6 * h)


def test_the_asset_uri_normalizer_is_registered_and_checks_the_shape() -> None:
    from airflow.sdk import Asset
    from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime

    from airflow_tablemgmt.assets.uri import refresh_uri, sanitize_uri, table_uri
    from airflow_tablemgmt.dag_factory import refresh_asset

    assert ProvidersManagerTaskRuntime().asset_uri_handlers["tablemgmt"] is sanitize_uri
    # The URIs the DAG factory makes come back unchanged (assets keep their identity in Airflow's DB).
    assert refresh_asset("Lake.sales.orders").uri == refresh_uri("Lake", "sales", "orders")
    assert Asset(uri=table_uri("lake", "sales", "orders") + "/").uri == "tablemgmt://lake/sales/orders"
    for bad in (
        "tablemgmt://lake/sales",
        "tablemgmt://lake/s/t/x",
        "tablemgmt://lake:1/s/t",
        "tablemgmt://lake/s/t?x=1",
    ):
        with pytest.raises(ValueError, match="tablemgmt://<catalog>/<namespace>/<table>"):
            Asset(uri=bad)
