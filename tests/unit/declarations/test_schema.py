"""`tablemgmt schema`: the JSON Schema of tables.yaml, generated from the models. Editors validate with it,
so it must accept every document the models accept (never stricter) and catch the common mistakes
(an unknown action, a misspelt option, a wrong enum value); the copy in docs/ must not go stale."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from airflow_tablemgmt.cli import main
from airflow_tablemgmt.core.schema import declarations_json_schema
from airflow_tablemgmt.declarations.parse import parse_declarations_text

ROOT = Path(__file__).resolve().parents[3]
CATALOG = "catalogs: [{name: lake, warehouse: /data/wh}]\n"

ACCEPTED = {
    "empty": "",
    "shipped": (ROOT / "dags" / "tables.yaml").read_text(),
    "demo": (ROOT / "dags" / "tables.demo.yaml").read_text().replace("__WAREHOUSE__", "/tmp/demo-wh"),
    "mapping-catalogs": "version: 1\ncatalogs: {lake: {warehouse: /data/wh}, rest1: {type: rest, "
    "properties: {uri: 'http://r:8181'}}}\ntables: []\n",
    "actions-with-defaults": CATALOG + "tables:\n- {catalog: lake, namespace: s, name: t, priority: 5,\n"
    "   actions: {expire-snapshots: {}, delete-orphans: {older-than: 3d}, rewrite-files: {strategy: sort,\n"
    "   sort-columns: [ts], interval: '0 3 * * *', retry-delay: 10m, trigger: schedule}}}\n",
    "dynamic-identifier-and-flink-keys": CATALOG + "dynamic-tables:\n- identifier: lake.s.daily\n"
    "  query: SELECT day, count(*) AS n FROM lake.s.t GROUP BY day\n  freshness: 1 DAY\n"
    "  partitioned-by: [day]\n  partition.fields.day.date-formatter: yyyy-MM-dd\n",
    "dynamic-parts": CATALOG
    + "dynamic-tables:\n- {catalog: lake, namespace: s, name: d, query: 'SELECT 1 AS x',"
    " freshness: 5 MINUTE, suspend-after-failures: 3}\n",
}

REJECTED = {
    "unknown-action": CATALOG + "tables: [{catalog: lake, namespace: s, name: t, actions: {compact: {}}}]\n",
    "misspelt-option": CATALOG
    + "tables: [{catalog: lake, namespace: s, name: t, actions: {expire-snapshots: {retain_lst: 1}}}]\n",
    "bad-strategy": CATALOG
    + "tables: [{catalog: lake, namespace: s, name: t, actions: {rewrite-files: {strategy: shuffle}}}]\n",
    "refresh-on-plain-table": CATALOG
    + "tables: [{catalog: lake, namespace: s, name: t, actions: {refresh: {}}}]\n",
    "action-without-braces": CATALOG
    + "tables: [{catalog: lake, namespace: s, name: t, actions: {expire-snapshots: }}]\n",
    "unknown-top-level": CATALOG + "tabels: []\n",
    "bad-catalog-type": "catalogs: [{name: lake, type: nessie, warehouse: /w}]\n",
    "dynamic-without-name": CATALOG + "dynamic-tables: [{query: 'SELECT 1', freshness: 1 HOUR}]\n",
    "wrong-version": "version: 2\n",
}


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = declarations_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_a_document_the_models_accept_is_valid_against_the_schema(validator, name: str) -> None:
    text = ACCEPTED[name]
    loaded = parse_declarations_text(text, f"{name}.yaml")
    assert loaded.errors == [], loaded.errors  # the premise: the models accept it
    errors = [e.message for e in validator.iter_errors(yaml.safe_load(text))]
    assert errors == []


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_the_common_mistakes_are_caught_by_the_schema_and_the_models(validator, name: str) -> None:
    text = REJECTED[name]
    assert list(validator.iter_errors(yaml.safe_load(text))), f"{name}: the schema accepted it"
    assert parse_declarations_text(text, f"{name}.yaml").errors, f"{name}: the models accepted it"


def test_durations_read_as_people_write_them(validator) -> None:
    defs = declarations_json_schema()["$defs"]
    older_than = defs["ExpireSnapshotsSettings"]["properties"]["older-than"]
    assert older_than["type"] == "string" and older_than["default"] == "5d"
    assert "format" not in older_than  # not ISO 8601's PT120H


def test_cli_prints_it_and_the_copy_in_docs_is_current(tmp_path: Path, capsys) -> None:
    assert main(["schema"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == declarations_json_schema()
    out = tmp_path / "tables.schema.json"
    assert main(["schema", "--out", str(out)]) == 0
    committed = (ROOT / "docs" / "tables.schema.json").read_text()
    assert out.read_text() == committed, (
        "docs/tables.schema.json is stale (a model in core/ changed): run "
        "`tablemgmt schema --out docs/tables.schema.json` and commit it"
    )
