"""Every listing of the CLI takes ``--output table|json|yaml`` through one output layer (cli/output.py);
``--json`` is ``--output json``; json and yaml carry the same document."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from airflow_tablemgmt.cli import main

LISTINGS = [
    ["catalogs"],
    ["tables"],
    ["processes"],
    ["dt", "list"],
    ["show", "lake.s.t"],
    ["jars", "list"],
    ["reap"],
]


@pytest.fixture
def store_url(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    assert (
        main(["--store-url", url, "catalog", "set", "lake", "--type", "hadoop", "--warehouse", "/tmp/w"]) == 0
    )
    assert main(["--store-url", url, "register", "lake.s.t", "--action", "expire-snapshots"]) == 0
    capsys.readouterr()
    return url


def _run(url: str, argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["--store-url", url, *argv]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("listing", LISTINGS, ids=" ".join)
def test_json_and_yaml_are_the_same_document(store_url: str, listing: list[str], capsys) -> None:
    as_json = json.loads(_run(store_url, [*listing, "--output", "json"], capsys))
    assert yaml.safe_load(_run(store_url, [*listing, "-o", "yaml"], capsys)) == as_json
    assert json.loads(_run(store_url, [*listing, "--json"], capsys)) == as_json


def test_table_is_for_people(store_url: str, capsys) -> None:
    out = _run(store_url, ["tables"], capsys)
    assert out.splitlines()[0].split()[:2] == ["TABLE", "FORMAT"] and "lake.s.t" in out
    assert json.loads(_run(store_url, ["tables", "-o", "json"], capsys))[0]["table"] == "lake.s.t"


def test_an_unknown_format_is_refused_with_the_allowed_ones(store_url: str, capsys) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--store-url", store_url, "tables", "--output", "xml"])
    assert e.value.code == 2
    assert "choose from 'table', 'json', 'yaml'" in capsys.readouterr().err
