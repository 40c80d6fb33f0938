"""Airflow discovers the package as a provider: the `airflow providers` CLI lists it, its hooks and its
`tablemgmt` connection type with the custom form declared in provider info."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_tablemgmt import __version__
from tests.e2e.conftest import BIN, run

pytestmark = pytest.mark.e2e

PACKAGE = "airflow-provider-tablemgmt"


def airflow_json(*args: str) -> Any:
    res = run([str(BIN / "airflow"), "providers", *args, "--output", "json"], timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    # Airflow may log (to stdout) before the document: decode from the first line that is JSON.
    decoder = json.JSONDecoder()
    offset = 0
    for line in res.stdout.splitlines(keepends=True):
        if line.lstrip().startswith(("[", "{")):
            try:
                return decoder.raw_decode(res.stdout, offset + len(line) - len(line.lstrip()))[0]
            except json.JSONDecodeError:
                pass
        offset += len(line)
    raise AssertionError(
        f"no JSON in the output of airflow providers {' '.join(args)}:\n{res.stdout[-3000:]}"
    )


def test_providers_list_includes_the_package(airflow_db: str) -> None:
    providers = {p["package_name"]: p for p in airflow_json("list")}
    assert PACKAGE in providers, sorted(providers)
    assert providers[PACKAGE]["version"] == __version__
    assert "lakehouse tables" in providers[PACKAGE]["description"]


def test_tablemgmt_connection_type_and_its_form_are_registered(airflow_db: str) -> None:
    hooks = {h["connection_type"]: h for h in airflow_json("hooks")}
    assert "tablemgmt" in hooks, sorted(hooks)
    assert hooks["tablemgmt"]["class"] == "airflow_tablemgmt.hooks.tablemgmt.TableMgmtHook"
    assert hooks["tablemgmt"]["package_name"] == PACKAGE
    assert hooks["tablemgmt"]["hook_name"] == "Table Management store"

    # The connection form: custom field behaviour and the "Store URL" field (the sensitive `dsn`).
    assert "tablemgmt" in {b["field_behaviours"] for b in airflow_json("behaviours")}
    widgets = {w["connection_parameter_name"]: w for w in airflow_json("widgets")}
    assert widgets["extra__tablemgmt__dsn"]["package_name"] == PACKAGE
    assert widgets["extra__tablemgmt__allow_local_sqlite"]["package_name"] == PACKAGE


def test_triggers_and_provider_configuration_are_listed(airflow_db: str) -> None:
    triggers = [t for t in airflow_json("triggers") if t["package_name"] == PACKAGE]
    assert sorted(t["class"] for t in triggers) == [
        "airflow_tablemgmt.triggers.snapshot",
        "airflow_tablemgmt.triggers.snapshot_changed",
    ]
    configs = {c["provider_config"][0]: c["provider_config"][1] for c in airflow_json("configs")}
    assert set(configs[PACKAGE]) == {"tablemgmt"}, configs.get(PACKAGE)
    res = run(
        [
            str(BIN / "airflow"),
            "config",
            "list",
            "--section",
            "tablemgmt",
            "--show-values",
            "--include-descriptions",
        ],
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    from airflow_tablemgmt.provider_config import OPTIONS

    for name, option in OPTIONS.items():
        assert f"\n{name} = {option['default']}".rstrip() in res.stdout, name
    assert "# How many triggerers run" in res.stdout
