"""What every format's maintainers share: the :class:`Maintainer` signature, ``settings`` (an action's options
parsed by its settings model) and ``paths`` (a path-based table's location). The maintainers themselves live
with their format (``formats/<format>/job``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from airflow_tablemgmt.core.identifiers import TableIdentifier

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_tablemgmt.spark.job.metrics import FirstRead


class Maintainer(Protocol):
    """A maintainer: run the action on ``table`` and return its summary."""

    def __call__(
        self,
        spark: SparkSession,
        table: TableIdentifier,
        options: dict[str, Any],
        *,
        early: FirstRead | None = None,
    ) -> dict[str, Any]: ...


__all__ = ["Maintainer"]
