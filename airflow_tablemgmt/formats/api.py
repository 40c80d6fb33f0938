"""The public API of a table format: what a format's package, built-in or a separate distribution, may
import. Everything a format needs is re-exported here and documented in docs/writing-a-format-plugin.md
(the built-in formats under ``airflow_tablemgmt.formats`` are its worked examples); anything else in this
package may change without notice. The Spark driver's side is ``airflow_tablemgmt.spark.job.plugins``.

A format is one :class:`Format` descriptor, exported by its package and named under the
``airflow_tablemgmt.formats`` entry point: its actions with their settings models and trigger strategies,
the execution engines, its Spark session (extensions, catalog, runtime jars, and the driver-side module
whose ``MAINTAINERS`` the job runs), and ``"module:attribute"`` references to its factory (a
:class:`FormatFactory` subclass), its health and views readers and its snapshot reader. Nothing is
registered as a side effect of an import.

This module imports only what declaring a format needs (no pyiceberg, no Spark), so a descriptor that
imports it stays cheap to read where the Spark driver runs.
"""

from __future__ import annotations

from airflow_tablemgmt.core.action_model import Action, ActionSettings
from airflow_tablemgmt.core.durations import Duration, format_duration
from airflow_tablemgmt.core.errors import ActionNotSupported, RecoverProcessFailed
from airflow_tablemgmt.core.factory import FormatSession, JobSpec, ProcessFactory, TriggerContext, declined
from airflow_tablemgmt.core.formats import (
    ENGINES,
    TABLE_FORMAT_PROPERTY,
    TABLE_LOCATION_OPTION,
    Format,
)
from airflow_tablemgmt.core.identifiers import TableIdentifier, validate_identifier
from airflow_tablemgmt.core.process import Process
from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
from airflow_tablemgmt.core.thresholds import ActionThresholds, Threshold
from airflow_tablemgmt.core.triggers import Interval, TriggerStrategy
from airflow_tablemgmt.factories.path_formats import retention_changed
from airflow_tablemgmt.formats.base import FormatFactory, format_job
from airflow_tablemgmt.metadata.errors import HealthUnavailable
from airflow_tablemgmt.metadata.format_views import TABS, LiveFile, ViewHook, details_view, files_view
from airflow_tablemgmt.metadata.health import Finding, FormatHealth, HealthHook

__all__ = [
    "ENGINES",
    "Action",
    "ActionNotSupported",
    "ActionSettings",
    "ActionThresholds",
    "CatalogSpec",
    "Duration",
    "Finding",
    "Format",
    "FormatFactory",
    "FormatHealth",
    "FormatSession",
    "HealthHook",
    "HealthUnavailable",
    "Interval",
    "JobSpec",
    "LiveFile",
    "Process",
    "ProcessFactory",
    "RecoverProcessFailed",
    "TABLE_FORMAT_PROPERTY",
    "TABLE_LOCATION_OPTION",
    "TABS",
    "TableIdentifier",
    "TableSpec",
    "Threshold",
    "TriggerContext",
    "TriggerStrategy",
    "ViewHook",
    "declined",
    "details_view",
    "files_view",
    "format_duration",
    "format_job",
    "retention_changed",
    "validate_identifier",
]
