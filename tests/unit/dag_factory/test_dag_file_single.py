"""A task start (single-DAG parse) reads one table's entry of each declarations file's sync record,
not the whole record, and never the cache of built DAGs."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_tablemgmt.dag_factory.dag_file import load_registry_and_build
from airflow_tablemgmt.store import Store
from airflow_tablemgmt.store.declaration_files import DeclarationFileRepository

DOC = "catalogs: [{name: lake, warehouse: /data/wh}]\ntables:\n" + "".join(
    f"  - {{catalog: lake, namespace: s, name: t{i}, actions: {{expire-snapshots: {{}}}}}}\n"
    for i in range(5)
)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(f"sqlite:///{tmp_path / 'store.db'}")
    yield s
    s.dispose()


def test_the_record_read_of_a_task_start_holds_only_its_table(tmp_path: Path, store: Store) -> None:
    y = tmp_path / "tables.yaml"
    y.write_text(DOC)
    load_registry_and_build(y, store=store)
    [full] = DeclarationFileRepository.of(store).get_many([str(y)]).values()
    [one] = (
        DeclarationFileRepository.of(store)
        .for_table([str(y), str(tmp_path / "missing.yaml")], "lake.s.t3")
        .values()
    )
    assert one.entries == {"lake.s.t3": full.entries["lake.s.t3"]} and len(full.entries) == 5
    assert (one.digest, one.context, one.catalogs, one.declares_tables) == (
        full.digest,
        full.context,
        full.catalogs,
        full.declares_tables,
    )
    [none] = DeclarationFileRepository.of(store).for_table([str(y)], "lake.s.unknown").values()
    assert none.entries == {} and none.digest == full.digest
    assert DeclarationFileRepository.of(store).for_table([], "lake.s.t3") == {}


def test_a_task_start_builds_its_dag_from_the_row_and_from_an_edited_file(
    tmp_path: Path, store: Store
) -> None:
    y = tmp_path / "tables.yaml"
    y.write_text(DOC)
    load_registry_and_build(y, store=store)
    one = load_registry_and_build(y, only_dag_id="tms__lake.s.t3__expire-snapshots", store=store)
    assert list(one.dags) == ["tms__lake.s.t3__expire-snapshots"] and not one.errors
    # An edit the dag-processor has not synced yet: the task start builds from the file.
    y.write_text(
        DOC.replace(
            "name: t3, actions: {expire-snapshots: {}}", "name: t3, actions: {expire-snapshots: {retries: 6}}"
        )
    )
    one = load_registry_and_build(y, only_dag_id="tms__lake.s.t3__expire-snapshots", store=store)
    assert one.dags["tms__lake.s.t3__expire-snapshots"].get_task("maintain").retries == 6


def test_a_task_start_of_a_table_our_formats_serve_loads_no_format_plugin() -> None:
    from airflow_tablemgmt.core.tables import TableSpec
    from airflow_tablemgmt.dag_factory.dag_file import _task_start_factories
    from airflow_tablemgmt.factories.discovery import default_factories

    ours = TableSpec(
        catalog="lake", namespace="s", name="t", actions={"expire-snapshots": {}, "rewrite-files": {}}
    )
    factories = _task_start_factories([ours])
    assert "iceberg" in factories.factories and factories is not default_factories()
    assert set(factories.factories) <= set(default_factories().factories)  # never another choice


def test_a_task_start_of_a_plugin_formats_table_builds_its_dag(tmp_path: Path, store: Store) -> None:
    pytest.importorskip("tablemgmt_paimon")
    from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
    from airflow_tablemgmt.dag_factory.dag_file import _task_start_factories
    from airflow_tablemgmt.factories.discovery import default_factories

    store.catalogs.upsert(CatalogSpec(name="lake", type="hadoop", warehouse=str(tmp_path)), Owner.STORE)
    spec = TableSpec(catalog="lake", namespace="s", name="p", format="paimon", actions={"compact": {}})
    store.tables.upsert(spec, Owner.STORE)
    assert _task_start_factories([spec]) is default_factories()  # only the plugin has the action
    one = load_registry_and_build(None, only_dag_id="tms__lake.s.p__compact", store=store)
    assert list(one.dags) == ["tms__lake.s.p__compact"] and not one.errors
