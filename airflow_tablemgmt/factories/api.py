"""The public factory API: what a format plugin (a separate distribution registered under the
``airflow_tablemgmt.process_factories`` entry point) may import on the scheduler's side. Everything a
plugin needs is re-exported here and documented in docs/writing-a-format-plugin.md; anything else in
this package may change without notice. The Spark driver's side is ``airflow_tablemgmt.spark.job.plugins``.

A plugin declares its format once, when its factory module is imported (:func:`declare_format`): its
actions with their settings models and trigger strategies, the execution engines, and the Spark session
(extensions, catalog, jars, and the driver-side module with its maintainers). Registration then checks a
table's actions against that declaration, and a run builds the job with :func:`plugin_job`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from airflow_tablemgmt.core.action_model import FORMATS, Action, ActionSettings
from airflow_tablemgmt.core.actions import ACTIONS
from airflow_tablemgmt.core.durations import Duration, format_duration
from airflow_tablemgmt.core.errors import ActionNotSupported, RecoverProcessFailed
from airflow_tablemgmt.core.factory import (
    FormatSession,
    JobSpec,
    ProcessFactory,
    TriggerContext,
    register_format_session,
)
from airflow_tablemgmt.core.format_actions import (
    FORMAT_MODULE_PROPERTY,
    TABLE_FORMAT_PROPERTY,
    TABLE_LOCATION_OPTION,
)
from airflow_tablemgmt.core.identifiers import TableIdentifier, validate_identifier
from airflow_tablemgmt.core.process import Process
from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
from airflow_tablemgmt.core.triggers import Interval, TriggerStrategy
from airflow_tablemgmt.factories.path_formats import FormatSupport, retention_changed
from airflow_tablemgmt.metadata.errors import HealthUnavailable
from airflow_tablemgmt.metadata.format_views import (
    TABS,
    LiveFile,
    ViewHook,
    details_view,
    files_view,
    register_views,
)
from airflow_tablemgmt.metadata.health import Finding, FormatHealth, HealthHook, register_health_hook

#: The execution engines a factory may declare (``FormatSupport.engines``).
ENGINES = ("spark-submit", "spark-connect")


def declare_format(support: FormatSupport, actions: Iterable[Action], session: FormatSession) -> None:
    """Declare a format: its actions (settings models registered for this format only, so a plugin's
    ``expire-snapshots`` never changes Iceberg's), what it supports (``support.strategies``' actions,
    checked when a table is registered), and its Spark session. Call it once, at import of the module
    the entry point names."""
    fmt = str(support.format)
    actions = list(actions)
    names = {a.name for a in actions}
    if names != set(support.strategies):
        raise ValueError(
            f"format {fmt!r}: the actions {sorted(names)} and the trigger strategies' actions "
            f"{sorted(support.strategies)} differ"
        )
    unknown = [e for e in support.engines if e not in ENGINES]
    if unknown:
        raise ValueError(
            f"format {fmt!r}: unknown execution engine(s) {unknown}; known: {', '.join(ENGINES)}"
        )
    if session.module is None:
        raise ValueError(f"format {fmt!r}: the session names no driver-side module (FormatSession.module)")
    for action in actions:
        ACTIONS.register(action, format=fmt)
    FORMATS.declare(fmt, names)
    register_format_session(fmt, session)


def declare_health(format: str, hook: HealthHook) -> None:
    """Declare how ``format``'s tables are measured: ``hook(catalog, table) -> FormatHealth`` reads the
    table's own metadata without a JVM (the catalog's secret references are resolved) and returns its
    figures and its findings, each a :class:`Finding` naming the action that would fix it and the points
    it costs; it raises :class:`HealthUnavailable` when the table cannot be read where it runs. The score
    (100 minus the points), the list's sort and filter, the overview, the page, ``tablemgmt show`` and the
    REST API take it from there. Call it once, at import of the factory's module."""
    register_health_hook(str(format), hook)


def declare_views(
    format: str,
    *,
    details: ViewHook | None = None,
    files: ViewHook | None = None,
    snapshots: ViewHook | None = None,
) -> None:
    """Declare how ``format``'s tables are shown on the table page's Details, Files and Snapshots tabs (and
    by ``GET /tables/{id}/details|files|snapshots``): each ``hook(catalog, table) -> dict`` reads the table's
    own metadata without a JVM (the catalog's secret references are resolved) and answers in the shared
    shape of ``metadata/format_views.py`` (:func:`details_view` and :func:`files_view` build two of them);
    it raises :class:`HealthUnavailable` when the table cannot be read where it runs (a 502 naming why).
    A view a format does not declare answers 422 naming the formats that have it. Call it once, at import
    of the factory's module."""
    register_views(str(format), {"details": details, "files": files, "snapshots": snapshots})


def plugin_job(
    table: TableSpec,
    action: str,
    options: dict[str, Any],
    context: TriggerContext,
    session: FormatSession,
    *,
    location: str | None = None,
) -> JobSpec:
    """The job of ``action`` on ``table``: the job spec's catalog is marked with the table's format and the
    format's driver-side module (the Spark job imports it, builds the format's session and runs the
    plugin's maintainer); ``location`` (a path-based table's) reaches the maintainer as the
    ``table-location`` option (``take_location`` on the driver's side)."""
    catalog = context.catalog
    properties = {
        **catalog.properties,
        TABLE_FORMAT_PROPERTY: str(table.format),
        FORMAT_MODULE_PROPERTY: str(session.module),
    }
    catalog = catalog.model_copy(update={"properties": properties})
    if location is not None:
        options = {**options, TABLE_LOCATION_OPTION: location}
    return JobSpec.build(table, catalog, action, options)


__all__ = [
    "ENGINES",
    "Action",
    "ActionNotSupported",
    "ActionSettings",
    "CatalogSpec",
    "Duration",
    "Finding",
    "FormatHealth",
    "FormatSession",
    "FormatSupport",
    "HealthHook",
    "HealthUnavailable",
    "Interval",
    "JobSpec",
    "LiveFile",
    "Process",
    "ProcessFactory",
    "RecoverProcessFailed",
    "TABS",
    "TableIdentifier",
    "TableSpec",
    "TriggerContext",
    "TriggerStrategy",
    "ViewHook",
    "declare_format",
    "declare_health",
    "declare_views",
    "details_view",
    "files_view",
    "format_duration",
    "plugin_job",
    "retention_changed",
    "validate_identifier",
]
