"""The settings the Hudi maintainers run Hudi's procedures with, against a concurrent writer's rows being lost
(docs/formats.md, *Faults*; measured by tests/faults/test_format_concurrent_writers.py): ``run_clustering``'s
arguments (the table by path, the sort, the layout, and the conflict strategy its execution must run with),
and ``hoodie.metadata.enable`` as the table has it for every procedure."""

from __future__ import annotations

from pathlib import Path

from airflow_tablemgmt.formats.hudi.actions import HudiClusteringSettings
from airflow_tablemgmt.formats.hudi.job.clustering import (
    CLUSTERING_WRITE_CONF,
    CONFLICT_STRATEGY_KEY,
    PREFER_WRITER,
    procedure_args,
)
from airflow_tablemgmt.formats.hudi.job.table import METADATA_ENABLE, metadata_as_on_table


def test_the_execution_prefers_the_writer() -> None:
    # Hudi 1.0.x's key (``hoodie.write.conflict.resolution.strategy`` is not one): a wrong key would be
    # ignored silently and leave the default strategy, under which the clustering checks nothing
    assert CONFLICT_STRATEGY_KEY == "hoodie.write.lock.conflict.resolution.strategy"
    assert PREFER_WRITER == "org.apache.hudi.client.transaction.PreferWriterConflictResolutionStrategy"
    assert CLUSTERING_WRITE_CONF == {CONFLICT_STRATEGY_KEY: PREFER_WRITER}


def test_procedure_args() -> None:
    s = HudiClusteringSettings.model_validate({"sort-columns": ["id", "v"], "layout": "z-order"})
    assert procedure_args("/w/app/events", s) == (
        "path => '/w/app/events', order => 'id,v', order_strategy => 'z-order', "
        "options => 'hoodie.write.lock.conflict.resolution.strategy="
        "org.apache.hudi.client.transaction.PreferWriterConflictResolutionStrategy'"
    )


class _Conf:
    """The three calls of pyspark's ``RuntimeConfig`` the context uses, over a dict."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)

    def set(self, key: str, value: str) -> None:
        self.values[key] = value

    def unset(self, key: str) -> None:
        self.values.pop(key, None)


class _Session:
    def __init__(self, values: dict[str, str]) -> None:
        self.conf = _Conf(values)


def _table(root: Path, partitions: str | None) -> str:
    (root / ".hoodie").mkdir(parents=True)
    lines = ["hoodie.table.name=events"] + (
        [f"hoodie.table.metadata.partitions={partitions}"] if partitions is not None else []
    )
    (root / ".hoodie" / "hoodie.properties").write_text("\n".join(lines) + "\n")
    return str(root)


def test_the_procedures_run_with_the_metadata_table_as_the_table_has_it(tmp_path: Path) -> None:
    """A table without a metadata table: the procedures run with it off (Hudi's default would create one the
    writers do not maintain); with one: on; the session's own value comes back afterwards."""
    spark = _Session({})
    with metadata_as_on_table(spark, _table(tmp_path / "plain", None)) as enabled:  # type: ignore[arg-type]
        assert enabled is False and spark.conf.values[METADATA_ENABLE] == "false"
    assert METADATA_ENABLE not in spark.conf.values
    spark = _Session({METADATA_ENABLE: "false"})
    with metadata_as_on_table(spark, _table(tmp_path / "mdt", "files")) as enabled:  # type: ignore[arg-type]
        assert enabled is True and spark.conf.values[METADATA_ENABLE] == "true"
    assert spark.conf.values[METADATA_ENABLE] == "false"
    spark = _Session({})
    with metadata_as_on_table(spark, _table(tmp_path / "empty", "")):  # type: ignore[arg-type]
        assert spark.conf.values[METADATA_ENABLE] == "false"
