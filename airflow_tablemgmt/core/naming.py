"""The DAG-id scheme, defined once: one DAG per (table, action), ``tms__<table id>__<action>``.

Pure rules (no Airflow): the DAG factory names its DAGs with :func:`dag_id_for`, the REST API and the
services find a table's DAGs with it, and :func:`parse_dag_id` reads a DAG id back (the DAG cache,
the task start's single-DAG parse, the UI's link from a DAG page).
"""

from __future__ import annotations

from collections.abc import Iterable

from airflow_tablemgmt.core.errors import TableMgmtError
from airflow_tablemgmt.core.identifiers import AIRFLOW_DAG_ID_MAX_LEN, AIRFLOW_TAG_MAX_LEN, TableIdentifier

DAG_PREFIX = "tms__"
#: The DAG that carries declaration errors into Airflow (an import error of the DAG file).
BROKEN_DAG_ID = "tms__broken_declarations"


def dag_id_for(table_id: str, action: str) -> str:
    """``lake.db.t``, ``rewrite-files`` -> ``tms__lake.db.t__rewrite-files``."""
    return f"{DAG_PREFIX}{table_id}__{action}"


def table_of(dag_id: str) -> str:
    """The table id part of one of our DAG ids, unchecked (the caller knows the id is ours)."""
    return dag_id[len(DAG_PREFIX) :].rpartition("__")[0]


def parse_dag_id(dag_id: str) -> tuple[str, str] | None:
    """``tms__lake.db.t__rewrite-files`` -> (``lake.db.t``, ``rewrite-files``); None if not ours."""
    if not dag_id.startswith(DAG_PREFIX) or dag_id == BROKEN_DAG_ID:
        return None
    body = dag_id[len(DAG_PREFIX) :]
    table_id, sep, action = body.rpartition("__")
    if not sep:
        return None
    try:
        TableIdentifier.parse(table_id)
    except TableMgmtError:
        return None
    return table_id, action


#: A policy's discovery DAG: ``tms__discover__<policy>`` (never a table's: its body is not catalog.namespace.table).
DISCOVERY_PREFIX = f"{DAG_PREFIX}discover__"


def discovery_dag_id(policy: str) -> str:
    """``fleet`` -> ``tms__discover__fleet``: the DAG that runs the policy's discovery on its interval."""
    return f"{DISCOVERY_PREFIX}{policy}"


def discovery_policy_of(dag_id: str) -> str | None:
    """The policy whose discovery DAG ``dag_id`` is, or None."""
    if not dag_id.startswith(DISCOVERY_PREFIX) or parse_dag_id(dag_id) is not None:
        return None
    return dag_id[len(DISCOVERY_PREFIX) :] or None


#: A policy's planned (policy, action) DAG: ``tms__plan__<policy>__<action>`` (ADR 0004; never a table's either).
PLAN_PREFIX = f"{DAG_PREFIX}plan__"


def plan_dag_id(policy: str, action: str) -> str:
    """``fleet``, ``rewrite-files`` -> ``tms__plan__fleet__rewrite-files``: the DAG that plans ``action`` over
    the tables ``policy`` enrolled and runs them in mapped batches."""
    return f"{PLAN_PREFIX}{policy}__{action}"


def plan_of(dag_id: str) -> tuple[str, str] | None:
    """(policy, action) of a planned DAG id, or None. An action name never holds ``__`` (kebab-case), so the
    last ``__`` splits them even for a policy named ``a__b``."""
    if not dag_id.startswith(PLAN_PREFIX) or parse_dag_id(dag_id) is not None:
        return None
    policy, sep, action = dag_id[len(PLAN_PREFIX) :].rpartition("__")
    return (policy, action) if sep and policy and action else None


#: At least as long as any built-in action's name (``tests/unit/dag_factory/test_task_start_imports.py`` checks
#: it): a table id whose DAG ids fit with a name this long fits with every built-in action, so validating it
#: needs no list of them (which imports every built-in format: a table's task start loads its own only).
ACTION_NAME_BOUND = 64


def dag_id_length_problem(table_id: str, actions: Iterable[str]) -> str | None:
    """Why ``table_id`` cannot become DAGs (Airflow's DAG-id and tag limits), or None."""
    problems = []
    longest = max(actions, key=len, default="")
    dag_id = dag_id_for(table_id, longest)
    if len(dag_id) > AIRFLOW_DAG_ID_MAX_LEN:
        problems.append(
            f"the DAG id {dag_id} would be {len(dag_id)} chars, Airflow allows {AIRFLOW_DAG_ID_MAX_LEN}"
        )
    if len(table_id) > AIRFLOW_TAG_MAX_LEN:
        problems.append(f"it is a tag of its DAGs and Airflow allows tags of {AIRFLOW_TAG_MAX_LEN} chars")
    if not problems:
        return None
    return (
        f"table id {table_id}: {len(table_id)} chars; {'; '.join(problems)}; "
        "shorten the catalog, namespace or table name"
    )
