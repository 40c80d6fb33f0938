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
