"""The iceberg factory declines expire-snapshots and delete-orphans on a table whose ``gc.enabled`` is false
(no JVM): a declined summary naming the property, read from the table's current metadata file of a hadoop
warehouse; other actions, other values and unreadable metadata get their job as before."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from airflow_tablemgmt.core.errors import RecoverProcessFailed
from airflow_tablemgmt.core.factory import JobSpec, TriggerContext
from airflow_tablemgmt.core.process import Process, ProcessStatus
from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
from airflow_tablemgmt.formats.iceberg.factory import IcebergProcessFactory

NOW = datetime(2026, 3, 10, 0, 30, tzinfo=UTC)
FACTORY = IcebergProcessFactory()
ACTIONS = {"expire-snapshots": {}, "delete-orphans": {}, "rewrite-files": {}}


def _warehouse(tmp_path: Path, properties: dict[str, str] | None, namespace: str = "sales") -> CatalogSpec:
    """A hadoop warehouse with the table's metadata as Iceberg writes it: v1 then v2, the hint naming v2."""
    meta = tmp_path / "wh" / namespace.replace(".", "/") / "orders" / "metadata"
    meta.mkdir(parents=True)
    (meta / "v1.metadata.json").write_text(json.dumps({"format-version": 2, "properties": {}}))
    doc: dict[str, object] = {"format-version": 2, "snapshots": []}
    if properties is not None:
        doc["properties"] = properties
    (meta / "v2.metadata.json").write_text(json.dumps(doc))
    (meta / "version-hint.text").write_text("2")
    return CatalogSpec(name="lake", warehouse=str(tmp_path / "wh"))


def _table(namespace: str = "sales") -> TableSpec:
    return TableSpec.model_validate(
        {"catalog": "lake", "namespace": namespace, "name": "orders", "actions": ACTIONS}
    )


@pytest.mark.parametrize("action", ["expire-snapshots", "delete-orphans"])
@pytest.mark.parametrize("value", ["false", "FALSE", " false "])
def test_declined_when_gc_is_disabled(tmp_path: Path, action: str, value: str) -> None:
    catalog = _warehouse(tmp_path, {"gc.enabled": value})
    out = FACTORY.trigger(_table(), action, TriggerContext(instant=NOW, catalog=catalog))
    assert isinstance(out, dict), out
    assert out["skipped"] is True and out["declined"] is True
    assert "gc.enabled" in out["reason"] and action in out["reason"] and "lake.sales.orders" in out["reason"]


def test_a_multi_level_namespace_is_read_from_its_nested_directory(tmp_path: Path) -> None:
    catalog = _warehouse(tmp_path, {"gc.enabled": "false"}, namespace="sales.eu")
    out = FACTORY.trigger(
        _table("sales.eu"), "expire-snapshots", TriggerContext(instant=NOW, catalog=catalog)
    )
    assert isinstance(out, dict) and "lake.sales.eu.orders" in out["reason"]


@pytest.mark.parametrize("properties", [None, {}, {"gc.enabled": "true"}, {"other": "false"}])
def test_the_job_runs_when_gc_is_enabled_or_not_set(
    tmp_path: Path, properties: dict[str, str] | None
) -> None:
    catalog = _warehouse(tmp_path, properties)
    for action in ("expire-snapshots", "delete-orphans"):
        assert isinstance(
            FACTORY.trigger(_table(), action, TriggerContext(instant=NOW, catalog=catalog)), JobSpec
        )


def test_other_actions_are_not_affected(tmp_path: Path) -> None:
    catalog = _warehouse(tmp_path, {"gc.enabled": "false"})
    assert isinstance(
        FACTORY.trigger(_table(), "rewrite-files", TriggerContext(instant=NOW, catalog=catalog)), JobSpec
    )


def test_unreadable_metadata_leaves_the_decision_to_the_job(tmp_path: Path) -> None:
    catalog = CatalogSpec(name="lake", warehouse=str(tmp_path / "nowhere"))
    out = FACTORY.trigger(_table(), "expire-snapshots", TriggerContext(instant=NOW, catalog=catalog))
    assert isinstance(out, JobSpec)


def test_a_recovering_process_is_abandoned_naming_the_property(tmp_path: Path) -> None:
    catalog = _warehouse(tmp_path, {"gc.enabled": "false"})
    process = Process(
        id=3,
        table_id="lake.sales.orders",
        action="expire-snapshots",
        instant=NOW,
        status=ProcessStatus.SUBMITTED,
    )
    with pytest.raises(RecoverProcessFailed, match="gc.enabled"):
        FACTORY.recover(_table(), process, TriggerContext(instant=NOW, catalog=catalog))
