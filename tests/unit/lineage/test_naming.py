"""OpenLineage names of tables: by location, as Spark's integration names Iceberg tables, with the catalog
name as a TABLE symlink; by the catalog's name where only the catalog knows the location."""

from __future__ import annotations

from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.lineage.naming import DatasetName, location_name, table_dataset, warehouse_namespace


def test_locations_are_named_by_scheme_and_authority() -> None:
    assert location_name("/data/wh/sales/orders/") == ("file", "/data/wh/sales/orders")
    assert location_name("file:///data/wh/t") == ("file", "/data/wh/t")
    assert location_name("s3a://Bucket/wh/t") == ("s3://Bucket", "/wh/t")
    assert location_name("hdfs://nn:8020/wh/t") == ("hdfs://nn:8020", "/wh/t")


def test_a_hadoop_table_is_its_location_with_the_catalog_name_as_symlink() -> None:
    catalog = CatalogSpec(name="lake", warehouse="s3://bucket/wh/")
    assert table_dataset(catalog, "sales", "orders") == DatasetName(
        "s3://bucket", "/wh/sales/orders", "s3://bucket/wh", "sales.orders"
    )


def test_a_service_catalogs_table_is_named_in_the_services_namespace() -> None:
    hive = CatalogSpec(name="hms", type="hive", warehouse="s3://b/w", properties={"uri": "thrift://hms:9083"})
    assert table_dataset(hive, "sales", "orders") == DatasetName(
        "hive://hms:9083", "sales.orders", "hive://hms:9083", "sales.orders"
    )
    rest = CatalogSpec(name="r", type="rest", properties={"uri": "https://catalog.example.com"})
    assert table_dataset(rest, "s", "t").namespace == "https://catalog.example.com"


def test_a_local_warehouse_is_the_symlink_namespace_as_spark_writes_it() -> None:
    # Spark's integration: file:<path> for a local warehouse (HadoopCatalogTypeHandler), so both sides'
    # TABLE symlinks are one name.
    assert table_dataset(CatalogSpec(name="lake", warehouse="/data/wh/"), "sales", "orders") == DatasetName(
        "file", "/data/wh/sales/orders", "file:/data/wh", "sales.orders"
    )
    assert warehouse_namespace("file:///data/wh") == "file:/data/wh"
    assert warehouse_namespace("file:/data/wh/") == "file:/data/wh"
    assert warehouse_namespace("s3a://bucket/wh/") == "s3://bucket/wh"
    assert warehouse_namespace("gs://bucket/wh") == "gs://bucket/wh"
    assert warehouse_namespace("hdfs://nn:8020/wh") == "hdfs://nn:8020/wh"
