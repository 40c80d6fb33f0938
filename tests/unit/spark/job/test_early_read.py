"""The job's early read finds a hadoop table's current metadata file by Iceberg's rule, or declines.

Iceberg 1.10's ``HadoopTableOperations.refresh()``: the version on the first line of
``version-hint.text``; its file ``v<N>.metadata.json``, ``v<N>.gz.metadata.json`` or
``v<N>.metadata.json.gz``; then every next version that has a file. Wherever Iceberg would do
something else (list the directory, report a missing file, say "no table"), the early read answers
None and the job asks Spark. No JVM here: the files are laid out by hand.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec, CatalogType
from airflow_tablemgmt.spark.job.early_read import current_metadata_file, metadata_dir, read_early


@pytest.fixture
def meta(tmp_path: Path) -> Path:
    path = tmp_path / "wh" / "db" / "t" / "metadata"
    path.mkdir(parents=True)
    return path


def _io():  # type: ignore[no-untyped-def]
    from pyiceberg.io.pyarrow import PyArrowFileIO

    return PyArrowFileIO()


def _versions(meta: Path, *names: str, hint: str | bytes | None = None) -> None:
    for name in names:
        (meta / name).write_text("{}")
    if hint is not None:
        data = hint if isinstance(hint, bytes) else hint.encode()
        (meta / "version-hint.text").write_bytes(data)


def test_the_hinted_version_is_current(meta: Path) -> None:
    _versions(meta, "v1.metadata.json", "v2.metadata.json", hint="2")
    assert current_metadata_file(_io(), str(meta)) == f"{meta}/v2.metadata.json"


def test_a_stale_hint_is_read_past_to_the_newest_version(meta: Path) -> None:
    _versions(
        meta, "v1.metadata.json", "v2.metadata.json", "v3.metadata.json", "v4.gz.metadata.json", hint="2"
    )
    assert current_metadata_file(_io(), str(meta)) == f"{meta}/v4.gz.metadata.json"


def test_the_look_ahead_stops_at_the_first_missing_version(meta: Path) -> None:
    _versions(meta, "v1.metadata.json", "v2.metadata.json", "v4.metadata.json", hint="1")
    assert current_metadata_file(_io(), str(meta)) == f"{meta}/v2.metadata.json"


@pytest.mark.parametrize("hint", ["3\n", "3\r\n", "3\rjunk", "003", "3\nanything else"])
def test_the_first_line_of_the_hint_is_the_version(meta: Path, hint: str) -> None:
    _versions(meta, "v3.metadata.json", hint=hint)
    assert current_metadata_file(_io(), str(meta)) == f"{meta}/v3.metadata.json"


@pytest.mark.parametrize("hint", ["", " 3", "3 ", "+3", "-3", "v3.metadata.json", "99999999999", b"\xff3"])
def test_a_hint_iceberg_would_not_parse_is_left_to_spark(meta: Path, hint: str | bytes) -> None:
    # Iceberg lists the directory then (or parses what Java's parseInt accepts): not guessed here.
    _versions(meta, "v3.metadata.json", hint=hint)
    assert current_metadata_file(_io(), str(meta)) is None


def test_no_hint_no_table_or_a_missing_version_file_is_left_to_spark(meta: Path, tmp_path: Path) -> None:
    _versions(meta, "v1.metadata.json", "v2.metadata.json")
    assert current_metadata_file(_io(), str(meta)) is None  # Iceberg would list the directory
    (meta / "version-hint.text").write_text("5")
    assert current_metadata_file(_io(), str(meta)) is None  # Iceberg: "version 5 is missing"
    (meta / "version-hint.text").write_text("0")
    assert current_metadata_file(_io(), str(meta)) is None  # version 0 without v0: no table
    assert current_metadata_file(_io(), str(tmp_path / "nothing" / "metadata")) is None


def test_the_old_gzip_name_is_left_to_spark(meta: Path) -> None:
    # Iceberg reads v<N>.metadata.json.gz; pyiceberg takes a name not ending .metadata.json for a table.
    _versions(meta, "v1.metadata.json", "v2.metadata.json.gz", hint="1")
    assert current_metadata_file(_io(), str(meta)) is None


def test_metadata_dir_is_iceberg_default_location(tmp_path: Path) -> None:
    table = TableIdentifier("lake", "db", "t")
    assert metadata_dir("/wh/", table) == "/wh/db/t/metadata"
    assert metadata_dir("file:/wh", table) == "file:/wh/db/t/metadata"


def test_only_local_hadoop_catalogs_are_read_early(tmp_path: Path) -> None:
    table = TableIdentifier("lake", "db", "t")
    remote = CatalogSpec(name="lake", warehouse="s3://bucket/wh")
    rest = CatalogSpec(name="lake", type=CatalogType.REST, properties={"uri": "http://localhost:1"})
    custom = CatalogSpec(name="lake", warehouse=str(tmp_path), properties={"catalog-impl": "x.Y"})
    for catalog in (remote, rest, custom):
        assert read_early(catalog, table) is None
    # A local hadoop table that does not exist: no answer either (Spark decides it is missing).
    assert read_early(CatalogSpec(name="lake", warehouse=str(tmp_path)), table) is None
