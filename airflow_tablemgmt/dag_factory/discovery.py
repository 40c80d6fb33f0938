"""Policies -> discovery DAGs: one small DAG per policy, ``tms__discover__<policy>``, on the policy's
``discovery-interval``, whose one task runs that policy's discovery pass (``services/enrolment.py``).

One DAG per policy rather than one for all: each policy has its own interval (a DAG has one schedule), so a
table created in a catalog is enrolled within one interval of the policy that matches it; a catalog that cannot
be listed fails only its policy's run (after what could be listed was applied), and each policy's passes have their own history in Airflow. Policies
are few, so the DAGs are too (a pass lists catalogs, it starts no Spark). Runs of one DAG never overlap
(``max_active_runs=1``), and two passes at once (a DAG and ``tablemgmt discover``) are safe: every change is a
guarded write (``store/enrolment.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from airflow.sdk import DAG, DeltaTriggerTimetable

from airflow_tablemgmt.core.durations import format_duration, to_timedelta
from airflow_tablemgmt.core.naming import discovery_dag_id
from airflow_tablemgmt.core.policies import Policy
from airflow_tablemgmt.dag_factory.timetables import START_DATE

log = logging.getLogger(__name__)

#: What a run's XCom carries of its changes (the enrolment records hold all of them).
XCOM_CHANGES = 200


def run_discovery(policy: str) -> dict[str, Any]:
    """The task: one discovery pass of ``policy`` on the store of the ``tablemgmt_default`` connection."""
    from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook
    from airflow_tablemgmt.services.enrolment import discover

    result = discover(TableMgmtHook().get_store(), policy=policy).to_dict()
    for c in result["catalogs"]:
        log.info(
            "catalog %s: %d table(s), %s",
            c["catalog"],
            c["tables"],
            "complete" if c["complete"] else "INCOMPLETE",
        )
        for line in [*c["failures"], *c["unreadable"]]:
            log.warning("  %s", line)
    for change in result["changes"]:
        log.info(
            "%s %s (policy %s): %s", change["change"], change["table"], change["policy"], change["reason"]
        )
    log.info("policy %s: %s", policy, result["counts"])
    incomplete = [c for c in result["catalogs"] if not c["complete"]]
    if incomplete:  # what could be listed was applied; the run fails so the outage is seen (and alerted)
        from airflow_tablemgmt.services.errors import DiscoveryIncomplete

        raise DiscoveryIncomplete(
            f"policy {policy}: {len(incomplete)} catalog(s) not listed completely, nothing retired from them: "
            + "; ".join(f"{c['catalog']}: {', '.join(c['failures'])}" for c in incomplete)
        )
    result["changes"] = result["changes"][:XCOM_CHANGES]
    return result


def build_discovery_dag(policy: Policy) -> DAG:
    # Imported here: a planned DAG's task start reads the policies through this module (stored_policies) and
    # needs no Python operator (nor the packaging parsers it imports).
    from airflow.providers.standard.operators.python import PythonOperator

    interval = to_timedelta(policy.discovery_interval)
    every = format_duration(interval)
    with DAG(
        dag_id=discovery_dag_id(policy.name),
        schedule=DeltaTriggerTimetable(interval),
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        dagrun_timeout=max(interval, to_timedelta("10m")),
        tags=["tablemgmt", "discovery", f"policy:{policy.name}"],
        description=f"discovery of policy {policy.name}: every {every}",
        doc_md=(
            f"Discovery of policy `{policy.name}` every {every}: lists the catalogs it names without a JVM, "
            "enrols new tables, retires dropped ones, records each change (`tablemgmt enrolments`)."
        ),
        is_paused_upon_creation=False,
        auto_register=False,
    ) as dag:
        PythonOperator(task_id="discover", python_callable=run_discovery, op_kwargs={"policy": policy.name})
    return dag


def build_discovery_dags(policies: Iterable[Policy], only_dag_id: str | None = None) -> dict[str, DAG]:
    """A discovery DAG per policy (only ``only_dag_id``'s when given); a policy whose DAG cannot be built is
    logged by name and the others still build."""
    out: dict[str, DAG] = {}
    for policy in policies:
        dag_id = discovery_dag_id(policy.name)
        if only_dag_id is not None and dag_id != only_dag_id:
            continue
        try:
            out[dag_id] = build_discovery_dag(policy)
        except Exception as e:  # noqa: BLE001 - one broken policy must not hide the others' DAGs
            log.error("policy %s: its discovery DAG could not be built: %s", policy.name, e)
    return out


def stored_policies(store: Any) -> list[Policy]:
    """The store's policies, or none when they cannot be read (the table DAGs still build). A row that no
    longer validates is logged and left out, as discovery leaves it (``services/enrolment.py``).

    Read from the repository, not through ``services.enrolment``: a task start of a planned or discovery DAG
    reads the policies, and importing discovery's service would bring the catalogs' listing with it."""
    try:
        from airflow_tablemgmt.store.policies import PolicyRepository

        readable, unreadable = PolicyRepository.of(store).list_with_errors()
        for u in unreadable:
            log.warning("tablemgmt discovery: %s", u.message)
        return [p.policy for p in readable]
    except Exception as e:  # noqa: BLE001 - a store without the policies' schema yet, or unreadable rows
        log.warning("tablemgmt: the policies could not be read, no discovery DAGs: %s", e)
        return []
