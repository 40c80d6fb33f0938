"""A Hudi job's launch puts Hudi's bundle on the driver's class path as well as in ``--jars`` (Hudi's
metadata table read after a clean failed with a ClassCastException from the class-loader split otherwise);
other formats' launches are unchanged, and a user's own driver class path is kept beside it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.formats import FORMATS, TABLE_FORMAT_PROPERTY
from airflow_tablemgmt.spark.launch import submit


def _job(fmt: str) -> JobSpec:
    catalog = {
        "name": "lake",
        "type": "hadoop",
        "warehouse": "/wh",
        "properties": {TABLE_FORMAT_PROPERTY: fmt},
    }
    return JobSpec(table={"catalog": "lake", "namespace": "ns", "name": "t"}, catalog=catalog, action="clean")


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> None:
    """The resolver's answer without the network (its own tests cover it): one jar per need."""
    from airflow_tablemgmt.spark.launch import artifacts

    monkeypatch.setattr(
        artifacts, "jar_paths", lambda needs, settings=None: [f"/jars/{n}.jar" for n in needs]
    )
    monkeypatch.setattr(submit, "jar_paths", artifacts.jar_paths)


def test_hudi_is_on_the_driver_class_path_and_in_jars(resolver: None, tmp_path: Path) -> None:
    assert FORMATS.get("hudi").session.driver_class_path
    spec = submit.build_submit_spec(_job("hudi"), tmp_path / "spec.json")
    assert "/jars/hudi.jar" in spec.jars
    assert spec.conf["spark.driver.extraClassPath"].split(os.pathsep)[0] == "/jars/hudi.jar"
    argv = spec.argv("spark-submit")
    assert "spark.driver.extraClassPath=/jars/hudi.jar" in argv


@pytest.mark.parametrize("fmt", ["iceberg", "delta"])
def test_other_formats_keep_their_launch(resolver: None, tmp_path: Path, fmt: str) -> None:
    assert "spark.driver.extraClassPath" not in submit.build_submit_spec(_job(fmt), tmp_path / "s.json").conf


def test_a_users_driver_class_path_is_kept(
    resolver: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        submit, "spark_defaults", lambda env: {"spark.driver.extraClassPath": "/opt/mine.jar"}
    )
    spec = submit.build_submit_spec(_job("hudi"), tmp_path / "spec.json")
    assert spec.conf["spark.driver.extraClassPath"] == os.pathsep.join(["/jars/hudi.jar", "/opt/mine.jar"])
