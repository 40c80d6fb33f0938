"""Apache Hudi tables: ``compaction`` (merge-on-read, RFC-43's two phases), ``clean``, ``clustering`` and
``archive``, run as Hudi's own Spark procedures in a session with Hudi's extensions only; the ``.hoodie``
timeline is read without a JVM.

This module is the format's descriptor (the ``hudi`` entry point of ``airflow_tablemgmt.formats``).
"""

from __future__ import annotations

from airflow_tablemgmt.core.factory import FormatSession
from airflow_tablemgmt.core.formats import Format
from airflow_tablemgmt.core.triggers import Interval, TriggerStrategy
from airflow_tablemgmt.formats.hudi.actions import (
    ACTIONS,
    HUDI_ARCHIVE,
    HUDI_CLEAN,
    HUDI_CLUSTERING,
    HUDI_COMPACTION,
)

NAME = "hudi"
_HERE = __name__
KRYO = "org.apache.spark.serializer.KryoSerializer"

# on_new_snapshot stays False: the timeline check (delta commits since the last compaction, commits since
# the last clean) runs in the factory's plan.
STRATEGIES: dict[str, TriggerStrategy] = {
    HUDI_COMPACTION.name: TriggerStrategy(Interval.parse("30m"), on_new_snapshot=False, parallelism=4),
    HUDI_CLEAN.name: TriggerStrategy(Interval.parse("6h"), on_new_snapshot=False, parallelism=2),
    HUDI_CLUSTERING.name: TriggerStrategy(Interval.parse("1d"), on_new_snapshot=False, parallelism=2),
    HUDI_ARCHIVE.name: TriggerStrategy(Interval.parse("1d"), on_new_snapshot=False, parallelism=2),
}

FORMAT = Format(
    name=NAME,
    title="Hudi",
    root=(".hoodie",),
    root_files=None,
    marker=".hoodie/",
    description="Apache Hudi (path-based, in a hadoop catalog's warehouse)",
    actions=ACTIONS,
    strategies=STRATEGIES,
    session=FormatSession(
        "org.apache.spark.sql.hudi.HoodieSparkSessionExtension",
        "org.apache.spark.sql.hudi.catalog.HoodieCatalog",
        (NAME,),
        {"spark.serializer": KRYO, "spark.kryo.registrator": "org.apache.spark.HoodieSparkKryoRegistrar"},
        module=f"{_HERE}.job",
        jars=("org.apache.hudi:hudi-spark3.5-bundle_2.12:1.0.2",),
        # The bundle shades Avro's generated classes: added by ``--jars`` only it lives in Spark's child class
        # loader while Spark's Avro sits in the application one, and reading the metadata table of a table
        # written with Hudi's defaults after a clean fails with ``ClassCastException: GenericData$Record
        # cannot be cast to HoodieDeleteRecordList`` (clustering, among others).
        driver_class_path=True,
    ),
    factory=f"{_HERE}.factory:HudiProcessFactory",
    path_based=True,
    health=f"{_HERE}.metadata:table_health",
    views={tab: f"{_HERE}.views:read_{tab}" for tab in ("details", "files", "snapshots")},
    marks=f"{_HERE}.marks:commits",
    reader=f"{_HERE}.reader:HudiTimelineReader",
)
