"""Multi-level namespaces (``lake.sales.eu.orders``), as REST catalogs such as Nessie and Polaris nest them:
the first part is the catalog, the last the table, everything between the namespace; two-part ids are
unchanged (their DAG ids, store rows, quoting and paths)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_tablemgmt.core.errors import InvalidDeclaration, InvalidIdentifier
from airflow_tablemgmt.core.identifiers import TableIdentifier, validate_namespace
from airflow_tablemgmt.core.naming import dag_id_for, parse_dag_id
from airflow_tablemgmt.core.tables import CatalogSpec, parse_table


def test_a_multi_level_namespace_parses_quotes_and_prints_back() -> None:
    t = TableIdentifier.parse("lake.sales.eu.orders")
    assert (t.catalog, t.namespace, t.name) == ("lake", "sales.eu", "orders")
    assert t.namespace_parts == ("sales", "eu")
    assert t.namespace_path == "sales/eu"
    assert t.quoted == "`lake`.`sales`.`eu`.`orders`"  # each part quoted on its own, never `sales.eu`
    assert t.in_catalog == "`sales`.`eu`.`orders`"
    assert str(t) == "lake.sales.eu.orders"
    assert TableIdentifier.parse(str(t)) == t


def test_a_one_level_namespace_is_unchanged() -> None:
    t = TableIdentifier.parse("lake.db.events")
    assert (t.namespace, t.namespace_parts, t.namespace_path) == ("db", ("db",), "db")
    assert t.quoted == "`lake`.`db`.`events`" and t.in_catalog == "db.events"
    assert dag_id_for(str(t), "rewrite-files") == "tms__lake.db.events__rewrite-files"


@pytest.mark.parametrize("bad", ["a..b", ".a", "a.", "a.b c", "a.`b`", "a.1b", "a." + "b" * 128])
def test_every_level_of_a_namespace_is_an_identifier(bad: str) -> None:
    with pytest.raises(InvalidIdentifier, match="namespace: .* is not a valid namespace"):
        validate_namespace(bad)
    with pytest.raises(InvalidIdentifier):
        TableIdentifier("lake", bad, "t")


@pytest.mark.parametrize("text", ["lake..orders", "lake.a..orders", "lake.a.b.", ".a.b.t"])
def test_empty_parts_are_refused(text: str) -> None:
    with pytest.raises(InvalidIdentifier):
        TableIdentifier.parse(text)


def test_two_parts_are_still_refused_naming_the_multi_level_form() -> None:
    with pytest.raises(
        InvalidIdentifier, match=r"catalog\.namespace\.table .*catalog\.level1\.level2\.table"
    ):
        TableIdentifier.parse("db.events")


def test_dag_ids_of_a_multi_level_table_read_back() -> None:
    dag_id = dag_id_for("lake.sales.eu.orders", "expire-snapshots")
    assert dag_id == "tms__lake.sales.eu.orders__expire-snapshots"
    assert parse_dag_id(dag_id) == ("lake.sales.eu.orders", "expire-snapshots")


def test_a_spec_takes_a_dotted_namespace_and_keeps_it_as_one_string() -> None:
    spec = parse_table({"catalog": "lake", "namespace": "sales.eu", "name": "orders"})
    assert spec.id == "lake.sales.eu.orders" and spec.namespace == "sales.eu"
    assert spec.identifier == TableIdentifier.parse("lake.sales.eu.orders")
    with pytest.raises(InvalidDeclaration, match="namespace: 'sales..eu' is not a valid namespace"):
        parse_table({"catalog": "lake", "namespace": "sales..eu", "name": "orders"})


def test_the_job_spec_carries_the_namespace_as_one_dotted_string() -> None:
    from airflow_tablemgmt.core.factory import JobSpec

    spec = parse_table({"catalog": "lake", "namespace": "sales.eu", "name": "orders"})
    job = JobSpec.build(spec, CatalogSpec(name="lake", warehouse="/wh"), "rewrite-files", {})
    assert job.table == {"catalog": "lake", "namespace": "sales.eu", "name": "orders"}
    t: dict[str, Any] = job.to_json_dict()["table"]
    assert TableIdentifier(t["catalog"], t["namespace"], t["name"]).quoted == "`lake`.`sales`.`eu`.`orders`"


def test_paths_of_a_multi_level_table_are_nested_directories() -> None:
    from airflow_tablemgmt.metadata.iceberg import SnapshotReader
    from airflow_tablemgmt.metadata.table_paths import table_location

    catalog = CatalogSpec(name="lake", warehouse="/wh")
    t = TableIdentifier.parse("lake.sales.eu.orders")
    assert table_location(catalog, t) == "/wh/sales/eu/orders"
    assert SnapshotReader(catalog).table_location(t) == "/wh/sales/eu/orders"


def test_an_asset_uri_of_a_multi_level_table_is_accepted() -> None:
    from urllib.parse import urlsplit

    from airflow_tablemgmt.assets.uri import sanitize_uri, table_uri

    uri = table_uri("lake", "sales.eu", "orders")
    assert uri == "tablemgmt://lake/sales.eu/orders"
    assert sanitize_uri(urlsplit(uri)).geturl() == uri
    with pytest.raises(ValueError, match="expected"):
        sanitize_uri(urlsplit("tablemgmt://lake/sales..eu/orders"))


def test_register_splits_a_multi_level_id() -> None:
    from airflow_tablemgmt.services.tables import _split_id

    assert _split_id("lake.sales.eu.orders") == {"catalog": "lake", "namespace": "sales.eu", "name": "orders"}
    assert _split_id("lake.db.t") == {"catalog": "lake", "namespace": "db", "name": "t"}
