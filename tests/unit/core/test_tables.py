import json

import pytest

from airflow_tablemgmt.core.actions import ACTIONS
from airflow_tablemgmt.core.errors import InvalidDeclaration, UnknownAction
from airflow_tablemgmt.core.tables import parse_table
from airflow_tablemgmt.declarations.model import LoadedDeclarations
from airflow_tablemgmt.declarations.parse import parse_declarations_text

CAT = {"name": "lake", "warehouse": "/tmp/wh"}


def parse_declarations(data: dict, source: str = "tables.yaml") -> LoadedDeclarations:
    """A whole declarations document through the real parse (``declarations.parse``); any error raises."""
    loaded = parse_declarations_text(json.dumps(data), source)
    loaded.raise_for_errors()
    return loaded


def decl(actions: dict) -> dict:
    return {
        "catalogs": [CAT],
        "tables": [{"catalog": "lake", "namespace": "db", "name": "t", "actions": actions}],
    }


def test_error_names_source_path_table_value() -> None:
    with pytest.raises(InvalidDeclaration) as e:
        parse_declarations(decl({"expire-snapshots": {"retain-last": 0}}), "dags/tables.yaml")
    assert str(e.value) == (
        "dags/tables.yaml: tables[0].actions.expire-snapshots.retain-last (table lake.db.t): "
        "Input should be greater than or equal to 1, got 0"
    )


def test_unknown_action_lists_known() -> None:
    with pytest.raises(
        InvalidDeclaration,
        match="known actions: archive, clean, clustering, compaction, compute-stats, delete-orphans",
    ):
        parse_declarations(decl({"rewrite-filez": {}}))
    with pytest.raises(UnknownAction):
        ACTIONS.get("nope")


def test_typo_in_option_is_an_error_not_a_default() -> None:
    with pytest.raises(InvalidDeclaration, match=r"rewrite-files\.min-input-file .*Extra inputs"):
        parse_declarations(decl({"rewrite-files": {"min-input-file": 2}}))


def test_bad_enum_lists_allowed() -> None:
    with pytest.raises(InvalidDeclaration, match="'binpack', 'sort' or 'zorder', got 'fast'"):
        parse_declarations(decl({"rewrite-files": {"strategy": "fast"}}))


def test_sort_needs_columns_and_columns_are_identifiers() -> None:
    with pytest.raises(InvalidDeclaration, match="sort-columns"):
        parse_declarations(decl({"rewrite-files": {"strategy": "zorder"}}))
    with pytest.raises(InvalidDeclaration, match="not a valid identifier"):
        parse_declarations(decl({"rewrite-files": {"strategy": "sort", "sort-columns": ["a; drop"]}}))


def test_orphan_floor_needs_explicit_override() -> None:
    with pytest.raises(InvalidDeclaration, match="24-hour floor"):
        parse_declarations(decl({"delete-orphans": {"older-than": "2h"}}))
    d = parse_declarations(decl({"delete-orphans": {"older-than": "2h", "allow-below-floor": True}}))
    assert d.tables[0].action_settings("delete-orphans").options()["older-than"] == "2h"


def test_interval_validated() -> None:
    with pytest.raises(InvalidDeclaration, match=r"rewrite-files\.interval .*not an interval"):
        parse_declarations(decl({"rewrite-files": {"interval": "often"}}))


def test_undeclared_catalog() -> None:
    d = decl({})
    d["tables"][0]["catalog"] = "other"
    with pytest.raises(InvalidDeclaration, match="'other' is not declared; declared catalogs: lake"):
        parse_declarations(d)


def test_defaults_documented_values() -> None:
    spec = parse_table(
        {
            "catalog": "lake",
            "namespace": "db",
            "name": "t",
            "actions": {"rewrite-files": {}, "expire-snapshots": {}, "delete-orphans": {}},
        }
    )
    rf = spec.action_settings("rewrite-files").options()
    assert rf["target-file-size-bytes"] == 512 * 1024 * 1024 and rf["min-input-files"] == 5
    es = spec.action_settings("expire-snapshots").options()
    assert es["older-than"] == "5d" and es["retain-last"] == 1
    assert spec.action_settings("delete-orphans").options()["older-than"] == "3d"
    assert spec.enabled_actions() == ["delete-orphans", "expire-snapshots", "rewrite-files"]


def test_spec_is_normalised_so_equal_input_is_equal() -> None:
    a = parse_table(
        {
            "catalog": "lake",
            "namespace": "db",
            "name": "t",
            "actions": {"rewrite-files": {"min-input-files": 5}},
        }
    )
    b = parse_table({"catalog": "lake", "namespace": "db", "name": "t", "actions": {"rewrite-files": {}}})
    assert a == b


def test_disabled_action_not_enabled() -> None:
    spec = parse_table(
        {"catalog": "lake", "namespace": "db", "name": "t", "actions": {"rewrite-files": {"enabled": False}}}
    )
    assert spec.enabled_actions() == []


def test_bad_table_name() -> None:
    with pytest.raises(InvalidDeclaration, match="name: 'ev-ents' is not a valid identifier"):
        parse_table({"catalog": "lake", "namespace": "db", "name": "ev-ents"})
