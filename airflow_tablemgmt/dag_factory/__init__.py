"""Registry -> Airflow DAG objects: one DAG per (declared table, enabled action), one planned DAG per
(policy, action) for the tables policies enrolled (``plan``), one discovery DAG per policy (``discovery``).

* ``build``: the DAGs of a registry (``build_dags``), one table's (``build_dag``);
* ``assets``: the watched snapshot asset of a table, a dynamic table's refresh asset;
* ``cache``: the per-host cache of built DAGs that a full parse reads;
* ``dag_file``: what the DAG file in the dags folder calls (``register_dags``);
* ``plan``: the planned (policy, action) DAGs, their plan task and mapped batches (ADR 0004);
* ``discovery``: a policy's discovery DAG;
* ``result``, ``timetables``: what the paths share (the parse's result, the start date, an interval's
  timetable), apart so that a task start of a planned or discovery DAG does not import ``build``.

The plans it renders are pure and live in core: DAG ids in ``core.naming``, schedules in
``core.schedule``. The names below are resolved on first use, so importing the package loads no
Airflow.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "BuildResult": "dag_factory.result",
    "BrokenDeclarationsDAG": "dag_factory.build",
    "DagConfigDefaults": "dag_factory.build",
    "START_DATE": "dag_factory.timetables",
    "build_dag": "dag_factory.build",
    "build_dags": "dag_factory.build",
    "cyclic_gc_paused": "dag_factory.build",
    "REFRESH": "dag_factory.assets",
    "after_refreshes": "dag_factory.assets",
    "event_plans": "dag_factory.assets",
    "refresh_asset": "dag_factory.assets",
    "table_asset": "dag_factory.assets",
    "watcher_capacity_warning": "dag_factory.assets",
    "build_with_cache": "dag_factory.cache",
    "load_registry_and_build": "dag_factory.dag_file",
    "register_dags": "dag_factory.dag_file",
    "build_plan_dags": "dag_factory.plan",
    "plan_dag_id": "core.naming",
    "BROKEN_DAG_ID": "core.naming",
    "DAG_PREFIX": "core.naming",
    "dag_id_for": "core.naming",
    "parse_dag_id": "core.naming",
    "FALLBACK_INTERVAL": "core.schedule",
    "SchedulePlan": "core.schedule",
    "event_names_action": "operators.gate",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"airflow_tablemgmt.{module}"), name)
