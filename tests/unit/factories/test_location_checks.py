"""A table's location checked without a JVM (``metadata/table_check.py``): a readable location that holds no
table of the declared format is refused at declaration (CLI/REST register, tables.yaml) naming what was found,
and declined at run time before any Spark job; a location not readable here is accepted with a warning and
left to the job. Real directories as each format lays them out (markers only: the check reads no more)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from airflow_tablemgmt.core.errors import TableMgmtError
from airflow_tablemgmt.core.factory import JobSpec, TriggerContext
from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.formats.delta.factory import DeltaProcessFactory
from airflow_tablemgmt.formats.hudi.factory import HudiProcessFactory
from airflow_tablemgmt.formats.iceberg.factory import IcebergProcessFactory
from airflow_tablemgmt.metadata.table_check import check_location
from airflow_tablemgmt.store import Store

NOW = datetime(2026, 3, 10, tzinfo=UTC)
T = TableIdentifier("lake", "ns", "t")


def _delta(root: Path) -> None:
    (root / "_delta_log").mkdir(parents=True)
    (root / "_delta_log" / "00000000000000000000.json").write_text("{}")


def _hudi(root: Path) -> None:
    (root / ".hoodie").mkdir(parents=True)
    (root / ".hoodie" / "hoodie.properties").write_text("hoodie.table.name=t\n")


def _iceberg(root: Path) -> None:
    (root / "metadata").mkdir(parents=True)
    (root / "metadata" / "v1.metadata.json").write_text("{}")
    (root / "metadata" / "version-hint.text").write_text("1")


def _plain(root: Path) -> None:
    root.mkdir(parents=True)
    (root / "part-0.parquet").write_text("x")


LAYOUTS = {"delta": _delta, "hudi": _hudi, "iceberg": _iceberg, "plain": _plain}


@pytest.mark.parametrize(
    ("declared", "written", "found"),
    [
        ("hudi", "plain", "a directory of 1 entries with no table metadata (part-0.parquet)"),
        ("iceberg", "delta", "a Delta table"),
        ("delta", "hudi", "a Hudi table"),
        ("hudi", "iceberg", "an Iceberg table"),
    ],
)
def test_not_a_table_of_its_format_names_what_was_found(
    tmp_path: Path, declared: str, written: str, found: str
) -> None:
    LAYOUTS[written](tmp_path / "ns" / "t")
    check = check_location(CatalogSpec(name="lake", warehouse=str(tmp_path)), T, declared)
    assert check.problem is not None and found in check.problem, check
    assert check.warning is None and not check.missing


@pytest.mark.parametrize("fmt", ["delta", "hudi", "iceberg"])
def test_a_table_of_its_format_passes(tmp_path: Path, fmt: str) -> None:
    LAYOUTS[fmt](tmp_path / "ns" / "t")
    check = check_location(CatalogSpec(name="lake", warehouse=str(tmp_path)), T, fmt)
    assert check.problem is None and check.warning is None


def test_missing_under_a_readable_warehouse_is_not_a_table(tmp_path: Path) -> None:
    check = check_location(CatalogSpec(name="lake", warehouse=str(tmp_path)), T, "hudi")
    assert check.missing and "does not exist" in str(check.problem)


def test_an_unreadable_warehouse_is_a_warning_not_a_problem(tmp_path: Path) -> None:
    for catalog in (
        CatalogSpec(name="lake", warehouse=str(tmp_path / "not-mounted-here")),
        CatalogSpec(name="lake", warehouse="hdfs://nn:8020/wh"),
        CatalogSpec(
            name="lake",
            warehouse="s3://bucket/wh",
            properties={"allow-unsafe-commits": "true", "spark.hadoop.fs.s3a.secret.key": "env:X"},
        ),
    ):
        check = check_location(catalog, T, "delta")
        assert check.problem is None and "not readable here" in str(check.warning), (catalog, check)


def test_catalog_tables_are_not_checked_by_path() -> None:
    rest = CatalogSpec(name="lake", type="rest", properties={"uri": "http://127.0.0.1:1"})
    assert check_location(rest, T, "iceberg") == check_location(rest, T, "iceberg").__class__()


# -- run time: declined before any job -------------------------------------------------------------------


def _spec(fmt: str, action: str) -> TableSpec:
    return TableSpec.model_validate(
        {"catalog": "lake", "namespace": "ns", "name": "t", "format": fmt, "actions": {action: {}}}
    )


@pytest.mark.parametrize(
    ("factory", "fmt", "action", "written"),
    [
        (HudiProcessFactory(), "hudi", "clean", None),
        (HudiProcessFactory(), "hudi", "archive", "plain"),
        (DeltaProcessFactory(), "delta", "vacuum", "hudi"),
        (IcebergProcessFactory(), "iceberg", "rewrite-files", "delta"),
        (IcebergProcessFactory(), "iceberg", "expire-snapshots", None),
    ],
)
def test_a_run_is_declined_before_any_job(
    tmp_path: Path, factory: object, fmt: str, action: str, written: str | None
) -> None:
    if written:
        LAYOUTS[written](tmp_path / "ns" / "t")
    ctx = TriggerContext(instant=NOW, catalog=CatalogSpec(name="lake", warehouse=str(tmp_path)))
    out = factory.trigger(_spec(fmt, action), action, ctx)  # type: ignore[attr-defined]
    assert isinstance(out, dict) and out["declined"] is True, out
    assert "declined before any Spark job" in out["reason"] and str(tmp_path / "ns" / "t") in out["reason"]


def test_a_run_on_an_unreadable_location_goes_to_the_job(tmp_path: Path) -> None:
    ctx = TriggerContext(instant=NOW, catalog=CatalogSpec(name="lake", warehouse=str(tmp_path / "elsewhere")))
    assert isinstance(DeltaProcessFactory().trigger(_spec("delta", "vacuum"), "vacuum", ctx), JobSpec)


# -- declaration: refused, or accepted with a warning ---------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(f"sqlite:///{tmp_path / 'store.db'}")
    yield s
    s.dispose()


def test_register_refuses_a_plain_directory_declared_as_hudi(store: Store, tmp_path: Path) -> None:
    from airflow_tablemgmt.services.tables import RegisterRequest, register_table

    _plain(tmp_path / "wh" / "ns" / "t")
    store.catalogs.upsert(CatalogSpec(name="lake", warehouse=str(tmp_path / "wh")), Owner.STORE)
    with pytest.raises(TableMgmtError, match=r"table lake\.ns\.t \(format hudi\): .* not a Hudi table"):
        register_table(store, RegisterRequest(table="lake.ns.t", format="hudi", actions=("clean",)))
    assert store.tables.list() == []
    _hudi(tmp_path / "wh" / "ns" / "h")
    ok = register_table(store, RegisterRequest(table="lake.ns.h", format="hudi", actions=("clean",)))
    assert ok.outcome == "created" and ok.warnings == []


def test_register_accepts_an_unreadable_location_with_a_warning(store: Store, tmp_path: Path) -> None:
    from airflow_tablemgmt.services.tables import RegisterRequest, register_table

    store.catalogs.upsert(
        CatalogSpec(name="lake", warehouse=str(tmp_path / "mounted-on-workers")), Owner.STORE
    )
    result = register_table(store, RegisterRequest(table="lake.ns.t", format="delta", actions=("vacuum",)))
    assert result.outcome == "created" and "not readable here" in result.warnings[0]


def test_tables_yaml_refuses_a_delta_table_declared_as_iceberg(store: Store, tmp_path: Path) -> None:
    from tests.unit.declarations.test_sync import parse_sync

    _delta(tmp_path / "wh" / "ns" / "d")
    _iceberg(tmp_path / "wh" / "ns" / "i")
    y = tmp_path / "tables.yaml"
    y.write_text(
        f"catalogs: [{{name: lake, warehouse: {tmp_path / 'wh'}}}]\n"
        "tables:\n"
        "  - {catalog: lake, namespace: ns, name: d, actions: {rewrite-files: {}}}\n"
        "  - {catalog: lake, namespace: ns, name: i, actions: {rewrite-files: {}}}\n"
        "  - {catalog: lake, namespace: ns, name: later, actions: {rewrite-files: {}}}\n"
    )
    report = parse_sync(store, y)
    assert sorted(t.spec.id for t in store.tables.list()) == ["lake.ns.i", "lake.ns.later"]
    assert any("lake.ns.d (format iceberg)" in e and "a Delta table" in e for e in report.errors), (
        report.errors
    )
