"""OpenLineage events of a refresh, written by the OpenLineage provider's real file transport: the refresh's
inputs are its source tables, its output its table, named by location with the catalog name as a TABLE
symlink; the events carry the ``tablemgmt`` job facet with the process.

The DAG runs with ``dag.test()`` in a subprocess: the OpenLineage provider caches its configuration per
process, and this test's ``[openlineage]`` settings must not leak into other tests. The refresh's Spark
job fails (its sources do not exist): OpenLineage reports a failed run with the same datasets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(400)]

TABLE = "lake.sales.daily"
SOURCES = ["lake.sales.orders", "lake.sales.customers"]
DAG_ID = f"tms__{TABLE}__refresh"
SCRIPT = textwrap.dedent(
    """
    import sys
    from airflow.dag_processing.dagbag import DagBag
    bag = DagBag(dag_folder=sys.argv[1])
    dag = bag.get_dag(sys.argv[2])
    assert dag is not None, (bag.import_errors, sorted(bag.dag_ids))
    dag.test()
    """
)


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_a_refresh_reports_its_sources_as_inputs_and_its_table_as_output(
    airflow_db: str, dags_folder: Path, tmp_path: Path
) -> None:
    from airflow_tablemgmt.core.dynamic import parse_dynamic_table
    from airflow_tablemgmt.core.tables import CatalogSpec, Owner
    from airflow_tablemgmt.store import Store

    warehouse = tmp_path / "wh"
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = Store.for_url(url)
    store.catalogs.upsert(CatalogSpec(name="lake", warehouse=str(warehouse)), Owner.STORE)
    spec = parse_dynamic_table(
        {
            "identifier": TABLE,
            "freshness": "1 DAY",
            "retries": 0,
            "source-tables": SOURCES,
            "query": "SELECT o.day, c.region, count(*) AS n FROM lake.sales.orders o "
            "JOIN lake.sales.customers c ON o.customer = c.id GROUP BY o.day, c.region",
        }
    )
    store.dynamic.upsert(spec, Owner.STORE, state="ACTIVE")

    events_file = tmp_path / "openlineage.jsonl"
    env = {
        **os.environ,
        "TABLEMGMT_STORE_URL": url,
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
            {"type": "file", "log_file_path": str(events_file), "append": True}
        ),
        "AIRFLOW__OPENLINEAGE__EXTRACTORS": "airflow_tablemgmt.lineage.extractor.TableMgmtExtractor",
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "tms-test",
        # The extractor opens the store through the tablemgmt_default connection: in a thread, not in the
        # listener's default forked child (which shares, and blocks on, the task's supervisor channel).
        "AIRFLOW__OPENLINEAGE__EXECUTE_IN_THREAD": "True",
        "AIRFLOW__OPENLINEAGE__EXECUTION_TIMEOUT": "60",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    res = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(dags_folder), DAG_ID],
        env=env,
        capture_output=True,
        text=True,
        timeout=350,
    )
    assert events_file.exists(), res.stdout[-4000:] + res.stderr[-4000:]

    events = [e for e in _events(events_file) if e.get("job", {}).get("name") == f"{DAG_ID}.maintain"]
    assert {e["eventType"] for e in events} >= {"START", "FAIL"}, [(e["eventType"], e["job"]) for e in events]
    expected_inputs = {("file", str(warehouse / "sales" / name)) for name in ("orders", "customers")}
    for event in events:
        assert {(d["namespace"], d["name"]) for d in event["inputs"]} == expected_inputs
        assert [(d["namespace"], d["name"]) for d in event["outputs"]] == [
            ("file", str(warehouse / "sales" / "daily"))
        ]
        symlinks = event["outputs"][0]["facets"]["symlinks"]["identifiers"]
        assert symlinks == [{"namespace": f"file:{warehouse}", "name": "sales.daily", "type": "TABLE"}]
    fail = next(e for e in events if e["eventType"] == "FAIL")
    facet = fail["job"]["facets"]["tablemgmt"]
    process = store.processes.list(table_id=TABLE, action="refresh", limit=1)[0]
    assert facet["table"] == TABLE and facet["action"] == "refresh"
    assert facet["processId"] == process.id and facet["status"] == "FAILED"
