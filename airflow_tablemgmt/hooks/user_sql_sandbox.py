"""Which submissions start in the user-SQL sandbox (``spark/launch/sandbox.py``), and with what hidden.

A dynamic table's job (action ``refresh``: its analysis, creation, refresh and drop) runs user SQL in its
driver, so its ``spark-submit`` is wrapped; maintenance jobs run the package's own statements and are
not. The sandbox hides ``AIRFLOW_HOME`` (``airflow.cfg``, the SQLite databases and secret files of a
local set-up), the DAGs and plugins folders, ``AIRFLOW_CONFIG`` and ``[tablemgmt] user_sql_hide``; it
makes the Python prefix and the package read-only; and it mounts back what the job needs if it lies
inside one of those (its spec directory, a local warehouse, Spark, Java, the jar and JVM class caches).

``[tablemgmt] user_sql_sandbox``: ``on`` (default) fails such a job with :class:`SandboxUnavailable`
where the kernel does not allow unprivileged namespaces; ``off`` runs it unsandboxed (docs/security.md).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from airflow_tablemgmt.core.tables import REFRESH_ACTION
from airflow_tablemgmt.hooks.airflow_settings import (
    artifact_settings,
    jvm_class_cache_settings,
    setting_or_airflow,
)
from airflow_tablemgmt.spark.errors import SandboxUnavailable
from airflow_tablemgmt.spark.launch import sandbox
from airflow_tablemgmt.spark.launch.class_cache import DEFAULT_DIR as CLASS_CACHE_DIR

if TYPE_CHECKING:
    from airflow_tablemgmt.core.factory import JobSpec
    from airflow_tablemgmt.spark.launch.submit import SubmitSpec

log = logging.getLogger(__name__)

PACKAGE_DIR = Path(__file__).resolve().parent.parent


def sandbox_mode() -> str:
    """``[tablemgmt] user_sql_sandbox``: ``on`` unless set to off/false/no/0."""
    value = (setting_or_airflow("tablemgmt", "user_sql_sandbox") or "on").strip().lower()
    return "off" if value in ("off", "false", "no", "0") else "on"


def _paths(value: str | None) -> list[str]:
    return [p for p in (value or "").replace(",", " ").split() if p]


def hidden_paths() -> list[str]:
    """What the job must not see: Airflow's home, DAGs and plugins, its config file, and the extra list."""
    home = os.environ.get("AIRFLOW_HOME") or str(Path("~/airflow").expanduser())
    found = [home, os.environ.get("AIRFLOW_CONFIG", "")]
    for key in ("dags_folder", "plugins_folder"):
        found.append(setting_or_airflow("core", key) or "")
    found += _paths(setting_or_airflow("tablemgmt", "user_sql_hide"))
    return [str(Path(p).expanduser()) for p in found if p]


def _local_paths(job: JobSpec) -> list[str]:
    """The catalog's local files the job needs: a local warehouse, a JDBC catalog's SQLite file."""
    catalog = job.catalog if isinstance(job.catalog, dict) else {}
    found = []
    warehouse = str(catalog.get("warehouse") or "")
    if warehouse.startswith("file:"):
        warehouse = "/" + warehouse[len("file:") :].lstrip("/")
    found.append(warehouse)
    uri = str((catalog.get("properties") or {}).get("uri") or "")
    if uri.startswith("jdbc:sqlite:"):
        found.append("/" + uri[len("jdbc:sqlite:") :].removeprefix("file:").lstrip("/"))
    return [p for p in found if p.startswith("/")]


def sandbox_prefix(job: JobSpec, spec_path: Path, spec: SubmitSpec) -> list[str]:
    """The command that goes before ``spark-submit …`` for ``job``: empty for a job without user SQL or
    with the sandbox switched off; raises :class:`SandboxUnavailable` when it is on and cannot run."""
    if job.action != REFRESH_ACTION:
        return []
    if sandbox_mode() == "off":
        log.warning("tablemgmt: [tablemgmt] user_sql_sandbox is off: this job's user SQL runs unsandboxed")
        return []
    reason = sandbox.unavailable()
    if reason is not None:
        raise SandboxUnavailable(
            f"a dynamic table's job runs its user SQL sandboxed, and {reason}; allow them (docs/security.md, "
            "Sandbox) or set [tablemgmt] user_sql_sandbox = off to run these jobs unsandboxed"
        )
    enabled, cache_dir = jvm_class_cache_settings()
    keep = [
        str(Path(spec_path).parent),
        *_local_paths(job),
        spec.env.get("SPARK_HOME", ""),
        spec.env.get("JAVA_HOME", ""),
        sys.prefix,
        str(PACKAGE_DIR),
        str(artifact_settings().directory),
        str(Path(cache_dir or CLASS_CACHE_DIR).expanduser()),
        *{str(Path(j).parent) for j in spec.jars if j.startswith("/")},
    ]
    box = sandbox.Sandbox(
        hide=tuple(hidden_paths()),
        read_only=(sys.prefix, sys.base_prefix, str(PACKAGE_DIR)),
        keep=tuple(k for k in keep if k),
    )
    return box.wrap([])
