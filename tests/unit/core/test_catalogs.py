"""CatalogSpec: warehouse paths, required properties per type, secrets only as references."""

from __future__ import annotations

import re

import pytest

from airflow_tablemgmt.core.errors import InvalidDeclaration
from airflow_tablemgmt.core.tables import CatalogSpec, parse_catalog

# A hadoop catalog on an object store must accept non-atomic commits explicitly.
UNSAFE = {"allow-unsafe-commits": "true"}


@pytest.mark.parametrize("warehouse", ["../../tmp", "data/wh", "./wh", "wh", "~/wh"])
def test_relative_warehouse_rejected(warehouse: str) -> None:
    with pytest.raises(
        InvalidDeclaration,
        match=rf"^catalog: warehouse: {re.escape(repr(warehouse))} is relative; allowed: an absolute path",
    ):
        parse_catalog({"name": "lake", "warehouse": warehouse})


@pytest.mark.parametrize(
    "warehouse",
    [
        "/data/wh",
        "file:/data/wh",
        "file:///data/wh",
        "s3://b/wh",
        "s3a://b/wh",
        "gs://b/w",
        "abfs://c@a/w",
        "hdfs://nn:8020/wh",
    ],
)
def test_absolute_paths_and_uris_accepted(warehouse: str) -> None:
    # A hadoop catalog on an object store also says it accepts non-atomic commits.
    properties = (
        {"allow-unsafe-commits": "true"}
        if "://" in warehouse and not warehouse.startswith(("file", "hdfs"))
        else {}
    )
    assert (
        parse_catalog({"name": "lake", "warehouse": warehouse, "properties": properties}).warehouse
        == warehouse
    )


@pytest.mark.parametrize("warehouse", ["s3://b/wh", "s3a://b/wh", "gs://b/w", "abfs://c@a/w"])
def test_a_hadoop_catalog_on_an_object_store_is_refused_without_the_opt_in(warehouse: str) -> None:
    with pytest.raises(InvalidDeclaration, match="allow-unsafe-commits: 'true'"):
        parse_catalog({"name": "lake", "warehouse": warehouse})
    glue = parse_catalog({"name": "lake", "type": "glue", "warehouse": warehouse})
    assert glue.warehouse == warehouse


@pytest.mark.parametrize("type_", ["rest", "hive", "jdbc"])
def test_uri_catalogs_need_uri(type_: str) -> None:
    with pytest.raises(InvalidDeclaration, match=rf"properties.uri: a {type_} catalog needs its 'uri'"):
        parse_catalog({"name": "lake", "type": type_})
    spec = parse_catalog({"name": "lake", "type": type_, "properties": {"uri": "thrift://h:9083"}})
    assert spec.properties["uri"] == "thrift://h:9083"


def test_glue_needs_warehouse() -> None:
    with pytest.raises(InvalidDeclaration, match="warehouse: a glue catalog needs a warehouse"):
        parse_catalog({"name": "lake", "type": "glue"})
    assert parse_catalog({"name": "lake", "type": "glue", "warehouse": "s3://b/w"}).warehouse == "s3://b/w"


def test_plaintext_secret_is_a_validation_error_naming_the_key() -> None:
    with pytest.raises(InvalidDeclaration, match=r"properties.token: a secret must be given as a reference"):
        parse_catalog({"name": "r", "type": "rest", "properties": {"uri": "http://x", "token": "s3cr3t"}})
    with pytest.raises(InvalidDeclaration) as e:
        parse_catalog(
            {"name": "r", "type": "rest", "properties": {"uri": "http://x", "s3.secret-access-key": "AKIA"}}
        )
    assert "AKIA" not in str(e.value)
    ok = parse_catalog(
        {"name": "r", "type": "rest", "properties": {"uri": "http://x", "token": "conn:rest_cat"}}
    )
    assert ok.properties["token"] == "conn:rest_cat"


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ({"warehouse": "/data/wh"}, {"warehouse": "/data/wh/"}),
        ({"warehouse": "/data/wh"}, {"warehouse": "file:/data/wh"}),
        ({"warehouse": "file:///data/wh//"}, {"warehouse": "/data/./wh"}),
        (
            {"warehouse": "s3://b/wh", "properties": UNSAFE},
            {"warehouse": "s3a://b/wh/", "properties": UNSAFE},
        ),
        (
            {"type": "rest", "properties": {"uri": "http://h:8181/"}},
            {"type": "rest", "properties": {"uri": "http://h:8181"}},
        ),
        (
            {"type": "hive", "warehouse": "s3://b/w", "properties": {"uri": "thrift://m:9083"}},
            {"type": "hive", "warehouse": "s3://b/w/", "properties": {"uri": "thrift://m:9083"}},
        ),
    ],
)
def test_same_physical_location(a: dict, b: dict) -> None:
    assert CatalogSpec(name="one", **a).location_key() == CatalogSpec(name="two", **b).location_key()


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ({"warehouse": "/data/wh"}, {"warehouse": "/data/wh2"}),
        ({"warehouse": "/data/wh"}, {"type": "glue", "warehouse": "/data/wh"}),
        (
            {"type": "rest", "properties": {"uri": "http://h:8181"}},
            {"type": "rest", "properties": {"uri": "http://g:8181"}},
        ),
        (
            {"type": "rest", "warehouse": "a", "properties": {"uri": "http://h"}},
            {"type": "rest", "warehouse": "b", "properties": {"uri": "http://h"}},
        ),
    ],
)
def test_different_physical_location(a: dict, b: dict) -> None:
    assert CatalogSpec(name="one", **a).location_key() != CatalogSpec(name="two", **b).location_key()


def test_declarations_reject_a_second_catalog_over_one_warehouse() -> None:
    import json

    from airflow_tablemgmt.declarations.parse import parse_declarations_text

    def parse_declarations(data: dict) -> None:  # the real parse of a declarations file
        parse_declarations_text(json.dumps(data), "tables.yaml").raise_for_errors()

    data = {"catalogs": [{"name": "lake", "warehouse": "/w"}, {"name": "lake2", "warehouse": "file:/w/"}]}
    with pytest.raises(
        InvalidDeclaration,
        match=r"catalogs\[1\] \(catalog lake2\): reaches the same tables as catalog lake",
    ):
        parse_declarations(data)
    with pytest.raises(InvalidDeclaration, match="declared twice"):
        parse_declarations(
            {"catalogs": [{"name": "lake", "warehouse": "/w"}, {"name": "lake", "warehouse": "/x"}]}
        )
