"""Trigger kwargs (stored by Airflow in its database) carry secret references, never resolved values;
the triggerer (and the sensor's worker) resolves them when it builds the pyiceberg reader."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from airflow.sdk.exceptions import TaskDeferred
from airflow.serialization.encoders import encode_trigger

from airflow_tablemgmt.core.errors import InvalidDeclaration
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.hooks.secrets import SecretResolutionError, resolve_catalog_spec
from airflow_tablemgmt.hooks.tablemgmt import STORE_URL_ENV, TableMgmtHook
from airflow_tablemgmt.operators.gate import SnapshotGateOperator
from airflow_tablemgmt.sensors.snapshot import TableSnapshotSensor
from airflow_tablemgmt.triggers.snapshot import TableSnapshotChangedTrigger, TableSnapshotTrigger
from tests.integration.iceberg_session import IcebergTables
from tests.integration.triggers.test_snapshot_triggers import DictAssetStateStore, next_event, roundtrip

pytestmark = pytest.mark.integration

SECRET = "trigger-secret-27182818"
ENV = "TMS_TRIGGER_SECRET"


def _with_secret(catalog: CatalogSpec) -> dict[str, object]:
    return {
        **catalog.model_dump(mode="json"),
        "properties": {"header.x-test": f"env:{ENV}", "s3.secret-access-key": f"env:{ENV}"},
    }


def test_watcher_serializes_references_and_reads_the_table_with_resolved_values(
    trig_tables: IcebergTables, trig_catalog: CatalogSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, SECRET)
    table = trig_tables.create("secret_watch")
    trigger = TableSnapshotTrigger(
        table_id=str(table), catalog=_with_secret(trig_catalog), poll_interval=0.2, last_snapshot_id=-1
    )

    stored = json.dumps(encode_trigger(trigger), default=str)  # what Airflow writes to its trigger table
    assert SECRET not in stored and f"env:{ENV}" in stored
    rebuilt = roundtrip(trigger)
    assert isinstance(rebuilt, TableSnapshotTrigger)
    rebuilt.asset_state_store = DictAssetStateStore()  # type: ignore[attr-defined]

    async def first_event() -> dict[str, object]:
        events = rebuilt.run()
        event = await next_event(events)
        await events.aclose()
        return event.payload

    payload = asyncio.run(first_event())
    assert payload["snapshot_id"] == trig_tables.snapshot_id(table)
    # The reader the triggerer built holds the resolved value; the trigger's kwargs still do not.
    assert rebuilt.reader.catalog.properties["header.x-test"] == SECRET
    assert SECRET not in json.dumps(rebuilt.serialize())


def test_a_trigger_refuses_a_catalog_whose_secrets_were_already_resolved(
    trig_catalog: CatalogSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, SECRET)
    resolved = resolve_catalog_spec(CatalogSpec.model_validate(_with_secret(trig_catalog)))
    assert resolved.properties["header.x-test"] == SECRET
    for build in (
        lambda: TableSnapshotTrigger(table_id="trig.db.t", catalog=resolved),
        lambda: TableSnapshotChangedTrigger(table_id="trig.db.t", catalog=resolved),
    ):
        with pytest.raises(InvalidDeclaration, match=r"catalog\.properties\.(header\.x-test|s3\.secret)"):
            build()


def test_changed_trigger_reports_an_unresolvable_reference_without_values(
    trig_tables: IcebergTables, trig_catalog: CatalogSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    table = trig_tables.create("secret_missing")
    trigger = TableSnapshotChangedTrigger(table_id=str(table), catalog=_with_secret(trig_catalog))

    async def first() -> dict[str, object]:
        events = trigger.run()
        event = await next_event(events)
        await events.aclose()
        return event.payload

    payload = asyncio.run(first())
    assert payload["status"] == "error"
    assert f"env:{ENV}" in str(payload["message"]) and "header.x-test" in str(payload["message"])


def test_sensor_resolves_on_the_worker_and_defers_with_references_only(
    trig_tables: IcebergTables, trig_catalog: CatalogSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, SECRET)
    table = trig_tables.create("secret_sensor")
    before = trig_tables.snapshot_id(table)
    sensor = TableSnapshotSensor(
        task_id="wait", table=str(table), catalog=_with_secret(trig_catalog), since_snapshot_id=before
    )
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})  # type: ignore[arg-type]
    assert sensor._snapshot_reader().catalog.properties["s3.secret-access-key"] == SECRET
    kwargs = deferred.value.trigger.serialize()[1]
    assert (
        SECRET not in json.dumps(kwargs) and kwargs["catalog"]["properties"]["header.x-test"] == f"env:{ENV}"
    )


def test_gate_task_resolves_the_stored_references_on_the_worker(
    trig_tables: IcebergTables,
    trig_catalog: CatalogSpec,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv(STORE_URL_ENV, f"sqlite:///{tmp_path / 'gate.db'}")
    monkeypatch.delenv("AIRFLOW_CONN_TABLEMGMT_DEFAULT", raising=False)
    table = trig_tables.create("secret_gate")
    store = TableMgmtHook().get_store()
    store.catalogs.upsert(CatalogSpec.model_validate(_with_secret(trig_catalog)), Owner.STORE)
    store.tables.upsert(
        TableSpec(catalog="trig", namespace=table.namespace, name=table.name, actions={"rewrite-files": {}}),
        Owner.STORE,
    )
    gate = SnapshotGateOperator(task_id="gate", table=str(table), action="rewrite-files")

    monkeypatch.delenv(ENV, raising=False)
    with pytest.raises(SecretResolutionError, match=rf"header\.x-test.*env:{ENV}"):
        gate.execute({})
    monkeypatch.setenv(ENV, SECRET)
    assert gate.execute({}) == trig_tables.snapshot_id(table)
