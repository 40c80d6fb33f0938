"""The Spark driver's public API for formats: a format's driver-side module (``FormatSession.module`` of its
descriptor) exports ``MAINTAINERS`` (action -> :class:`Maintainer`), and the job runs the one of the job's
action, for every format alike (:func:`format_maintainer`).

How the job finds the module: the job spec's catalog names the table's format (``tablemgmt.table-format``,
set by the format's factory); the job looks the format up among the installed ones (the entry points, as
the scheduler does) and imports the module its descriptor names. A name that is not an installed format is
refused: nothing the job spec carries is imported. Nothing here imports the launcher, the factories or the
store (the driver contract in pyproject.toml).

Public (docs/writing-a-format-plugin.md): :class:`FormatSession`, :class:`Maintainer`, :func:`take_location`,
:func:`timed`, :func:`parse_duration`, :class:`TableIdentifier`, :func:`quote`, :data:`TABLE_FORMAT_PROPERTY`.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from airflow_tablemgmt.core.durations import to_timedelta as parse_duration
from airflow_tablemgmt.core.factory import FormatSession
from airflow_tablemgmt.core.formats import TABLE_FORMAT_PROPERTY, TABLE_LOCATION_OPTION
from airflow_tablemgmt.core.identifiers import TableIdentifier, quote
from airflow_tablemgmt.spark.errors import InvalidJobSpec
from airflow_tablemgmt.spark.job.commit_mark import commit_user_prefix
from airflow_tablemgmt.spark.job.maintainers.paths import take_location
from airflow_tablemgmt.spark.protocol import timed

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_tablemgmt.core.tables import CatalogSpec


class Maintainer(Protocol):
    """Run one action on ``table`` in ``spark`` (a session built for the format) and return its summary
    (JSON-ready: it becomes the process's summary and the task's XCom)."""

    def __call__(
        self, spark: SparkSession, table: TableIdentifier, options: dict[str, Any], *, early: object = None
    ) -> dict[str, Any]: ...


def format_module(catalog: CatalogSpec) -> Any:
    """The driver-side module of the format the job's catalog names (``FormatSession.module`` of its
    descriptor; an installed format only): its ``MAINTAINERS``, and optionally ``mark_commits`` /
    ``unmark_commits`` (``spark/job/commit_mark.py``)."""
    from airflow_tablemgmt.spark.conf import format_session

    return importlib.import_module(str(format_session(catalog).module))


def format_maintainers(catalog: CatalogSpec) -> Mapping[str, Maintainer]:
    """The maintainers (action -> maintainer) of the format the job's catalog names: the ``MAINTAINERS`` of
    its driver-side module (:func:`format_module`)."""
    module = format_module(catalog)
    found: Mapping[str, Maintainer] | None = getattr(module, "MAINTAINERS", None)
    if not isinstance(found, Mapping):
        raise InvalidJobSpec(f"{module.__name__} declares no MAINTAINERS (action -> maintainer)")
    return found


def format_maintainer(catalog: CatalogSpec, action: str) -> Maintainer:
    """The maintainer of ``action`` for the job's catalog's format; ``InvalidJobSpec`` naming the known ones."""
    maintainers = format_maintainers(catalog)
    found = maintainers.get(action)
    if found is None:
        raise InvalidJobSpec(
            f"action: {action!r} has no Spark maintainer; known: {', '.join(sorted(maintainers))}"
        )
    return found


def reads_own_table(catalog: CatalogSpec, maintainer: Maintainer) -> bool:
    """Whether the maintainer reads its table itself, so the job does not load it first: every maintainer
    of a format with its own session catalog or catalog class (the catalog is not the format's), and one
    that creates its table (``may_create_table``, a dynamic table's first refresh)."""
    from airflow_tablemgmt.spark.conf import format_session, owns_catalog

    return not owns_catalog(format_session(catalog)) or bool(getattr(maintainer, "may_create_table", False))


__all__ = [
    "TABLE_FORMAT_PROPERTY",
    "TABLE_LOCATION_OPTION",
    "FormatSession",
    "Maintainer",
    "parse_duration",
    "TableIdentifier",
    "commit_user_prefix",
    "format_maintainer",
    "format_maintainers",
    "format_module",
    "quote",
    "reads_own_table",
    "take_location",
    "timed",
]
