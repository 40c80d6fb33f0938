"""The Spark driver's public API for format plugins: a plugin's driver-side module registers its format's
Spark session and its maintainers here when imported, and the job looks a plugin format's maintainer up
here before its own (Iceberg's, Delta's, Hudi's ``MAINTAINERS``).

How the job finds the module: the plugin's factory builds its job with
``airflow_tablemgmt.factories.api.plugin_job``, which marks the job spec's catalog with the format and the
module (``FormatSession.module``); ``spark.conf.table_format`` imports the module the first time the job
meets the format, before the session is built. Nothing here imports the launcher, the factories or the
store (the driver contract in pyproject.toml).

Public (docs/writing-a-format-plugin.md): :class:`FormatSession`, :func:`register_format`,
:class:`Maintainer`, :func:`take_location`, :func:`timed`, :func:`parse_duration`, :class:`TableIdentifier`, :func:`quote`,
:data:`TABLE_FORMAT_PROPERTY`, :func:`commit_user_prefix` (the running job's attempt as a commit-user
prefix, for a format whose commits name their user; ``spark/job/commit_mark.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from airflow_tablemgmt.core.durations import to_timedelta as parse_duration
from airflow_tablemgmt.core.factory import FormatSession, register_format_session
from airflow_tablemgmt.core.format_actions import TABLE_FORMAT_PROPERTY, TABLE_LOCATION_OPTION
from airflow_tablemgmt.core.identifiers import TableIdentifier, quote
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


#: format -> action -> maintainer, registered by plugins' driver-side modules.
PLUGIN_MAINTAINERS: dict[str, dict[str, Maintainer]] = {}


def register_format(format: str, session: FormatSession, maintainers: Mapping[str, Maintainer]) -> None:
    """Declare ``format``'s Spark session and its maintainers (by action name) to the job. Each maintainer
    reads its own table (the job does not load it through Iceberg first)."""
    register_format_session(format, session)
    for maintainer in maintainers.values():
        maintainer.may_create_table = True  # type: ignore[attr-defined]  # the job must not preload the table
    PLUGIN_MAINTAINERS.setdefault(str(format), {}).update(maintainers)


def plugin_maintainer(catalog: CatalogSpec, action: str) -> Maintainer | None:
    """The maintainer a plugin format registered for ``action`` on the job's catalog's format, if any."""
    from airflow_tablemgmt.spark.conf import table_format

    own = PLUGIN_MAINTAINERS.get(table_format(catalog))
    return None if own is None else own.get(action)


__all__ = [
    "PLUGIN_MAINTAINERS",
    "TABLE_FORMAT_PROPERTY",
    "TABLE_LOCATION_OPTION",
    "FormatSession",
    "Maintainer",
    "parse_duration",
    "TableIdentifier",
    "commit_user_prefix",
    "plugin_maintainer",
    "quote",
    "register_format",
    "take_location",
    "timed",
]
