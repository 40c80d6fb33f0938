"""``toyparquet``: a table is a directory of Parquet files; its one action, ``compact``, rewrites them into
``files`` files. The descriptor is all a format declares; the factory, the health and views readers and
the driver's maintainers are named for first use."""

from __future__ import annotations

from pydantic import Field

from airflow_tablemgmt.formats.api import (
    Action,
    ActionSettings,
    Format,
    FormatSession,
    Interval,
    TriggerStrategy,
)


class CompactSettings(ActionSettings):
    """``compact``: rewrite the directory's Parquet files into ``files`` files once it holds more than
    ``min-files``."""

    files: int = Field(default=1, ge=1, le=1000, description="how many files to write")
    min_files: int = Field(default=2, ge=2, description="compact only above this many files")


COMPACT = Action("compact", CompactSettings, True, "toyparquet: rewrite the Parquet files into fewer")

FORMAT = Format(
    name="toyparquet",
    title="ToyParquet",
    description="a directory of Parquet files (a test's fifth format)",
    actions=(COMPACT,),
    strategies={"compact": TriggerStrategy(Interval.parse("1h"), on_new_snapshot=False, parallelism=1)},
    # Spark reads Parquet natively: no extensions, no catalog, no jars.
    session=FormatSession("", None, (), module="toyparquet.job"),
    factory="toyparquet.factory:ToyParquetFactory",
    path_based=True,
    health="toyparquet.health:table_health",
    views={"files": "toyparquet.health:read_files"},
    root=(),
)
