"""spark/conf.py: a job's session is its table's format's alone."""

from __future__ import annotations

import pytest

from airflow_tablemgmt.core.formats import FORMATS
from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.spark.conf import catalog_conf, launch_conf, session_conf
from airflow_tablemgmt.spark.errors import InvalidJobSpec


def catalog(fmt: str | None, **properties: str) -> CatalogSpec:
    props = dict(properties)
    if fmt:
        props["tablemgmt.table-format"] = fmt
    return CatalogSpec(name="lake", type="hadoop", warehouse="/w", properties=props)


def test_iceberg_is_unchanged() -> None:
    conf = session_conf(catalog(None))
    assert conf == {
        "spark.sql.extensions": FORMATS.get("iceberg").session.extensions,
        **catalog_conf(catalog(None)),
    }


@pytest.mark.parametrize("fmt", ["delta", "hudi"])
def test_a_path_format_loads_no_other_formats_runtime(fmt: str) -> None:
    conf = session_conf(catalog(fmt, **{"spark.hadoop.fs.s3a.endpoint": "http://s3"}))
    assert conf["spark.sql.extensions"] == FORMATS.get(fmt).session.extensions
    assert conf["spark.sql.catalog.spark_catalog"] == FORMATS.get(fmt).session.session_catalog
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://s3"
    others = [f.session.extensions for f in FORMATS.all() if f.name != fmt]
    assert not any(o in v for o in others for v in conf.values())
    assert "spark.sql.catalog.lake" not in conf  # no Iceberg catalog


def test_hudi_gets_kryo_on_the_command_line() -> None:
    assert launch_conf(catalog("hudi"))["spark.serializer"] == "org.apache.spark.serializer.KryoSerializer"
    assert "spark.serializer" not in launch_conf(catalog("delta"))


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(InvalidJobSpec, match="unknown format 'lance'"):
        session_conf(catalog("lance"))
