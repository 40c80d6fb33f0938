"""Delta Lake tables: ``optimize`` and ``vacuum``, run as Delta's own SQL in a session with Delta's
extensions only; the ``_delta_log`` is read without a JVM.

This module is the format's descriptor (the ``delta`` entry point of ``airflow_tablemgmt.formats``).
"""

from __future__ import annotations

from airflow_tablemgmt.core.factory import FormatSession
from airflow_tablemgmt.core.formats import Format
from airflow_tablemgmt.core.triggers import Interval, TriggerStrategy
from airflow_tablemgmt.formats.delta.actions import ACTIONS, OPTIMIZE, VACUUM

NAME = "delta"
_HERE = __name__

# on_new_snapshot stays False: a Delta action's own check (the log since the last OPTIMIZE) runs in the
# factory's plan.
STRATEGIES: dict[str, TriggerStrategy] = {
    OPTIMIZE.name: TriggerStrategy(Interval.parse("1h"), on_new_snapshot=False, parallelism=4),
    VACUUM.name: TriggerStrategy(Interval.parse("1d"), on_new_snapshot=False, parallelism=2),
}

FORMAT = Format(
    name=NAME,
    title="Delta",
    root=("_delta_log",),
    root_files=None,
    marker="_delta_log/",
    description="Delta Lake (path-based, in a hadoop catalog's warehouse)",
    actions=ACTIONS,
    strategies=STRATEGIES,
    session=FormatSession(
        "io.delta.sql.DeltaSparkSessionExtension",
        "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        (NAME,),
        module=f"{_HERE}.job",
        jars=("io.delta:delta-spark_2.12:3.3.2", "io.delta:delta-storage:3.3.2"),
    ),
    factory=f"{_HERE}.factory:DeltaProcessFactory",
    path_based=True,
    health=f"{_HERE}.metadata:table_health",
    views={tab: f"{_HERE}.views:read_{tab}" for tab in ("details", "files", "snapshots")},
    marks=f"{_HERE}.marks:commits",
    reader=f"{_HERE}.reader:DeltaLogReader",
)
