"""A table's health read, whatever its format: the hook its format declared
(:func:`factories.api.declare_health`), else the built-in Iceberg file figures of ``metadata/files.py``.

One definition for every reader of health: the page and the REST API (``services/health.py``) and the
worker's ``unhealthy`` alert (``notifications/health.py``). The catalog's secret references are resolved
by the caller (``hooks.secrets``, a layer above this one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.metadata.files import FileStats
from airflow_tablemgmt.metadata.health import FormatHealth, HealthScore, health_hook, score

if TYPE_CHECKING:
    from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec

#: What a table's health read gives: the built-in file figures, or what its format's health hook reports.
Reading = FileStats | FormatHealth


def format_hook(format: str) -> Any:
    """The health hook ``format`` declared; the installed factories (built-in and plugins, by entry point)
    are imported once when none is known yet, since a factory declares its hook when imported."""
    hook = health_hook(format)
    if hook is None:
        from airflow_tablemgmt.factories.discovery import default_factories

        default_factories()
        hook = health_hook(format)
    return hook


def read_health(resolved: CatalogSpec, table: TableSpec) -> Reading:
    """``table``'s health read through ``resolved`` (a catalog whose secret references are resolved)."""
    hook = format_hook(str(table.format))
    if hook is not None:
        return hook(resolved, table)
    from airflow_tablemgmt.metadata.files import read_file_stats

    return read_file_stats(resolved, table)


def score_of(reading: Reading) -> HealthScore:
    """The score of a read: the format's findings, or the built-in figures' (``metadata/health.py``)."""
    return reading.score if isinstance(reading, FormatHealth) else score(reading)
