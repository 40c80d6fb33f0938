"""A table's health read, whatever its format: the hook its format's descriptor names (``Format.health``:
a ``FormatHealth``, or the file figures of ``metadata/files.py``).

One definition for every reader of health: the page and the REST API (``services/health.py``) and the
worker's ``unhealthy`` alert (``notifications/health.py``). The catalog's secret references are resolved
by the caller (``hooks.secrets``, a layer above this one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.formats import FORMATS
from airflow_tablemgmt.metadata.errors import HealthUnavailable
from airflow_tablemgmt.metadata.files import FileStats
from airflow_tablemgmt.metadata.health import FormatHealth, HealthScore, score

if TYPE_CHECKING:
    from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec

#: What a table's health read gives: the built-in file figures, or what its format's health hook reports.
Reading = FileStats | FormatHealth


def format_hook(format: str) -> Any:
    """The health hook ``format``'s descriptor names (imported on first use), or None."""
    fmt = FORMATS.find(format)
    return None if fmt is None else fmt.load(fmt.health)


def read_health(resolved: CatalogSpec, table: TableSpec) -> Reading:
    """``table``'s health read through ``resolved`` (a catalog whose secret references are resolved)."""
    hook = format_hook(str(table.format))
    if hook is None:
        raise HealthUnavailable(f"table {table.id}: its format {table.format!r} declares no health reader")
    reading: Reading = hook(resolved, table)
    return reading


def score_of(reading: Reading) -> HealthScore:
    """The score of a read: the format's findings, or the built-in figures' (``metadata/health.py``)."""
    return reading.score if isinstance(reading, FormatHealth) else score(reading)
