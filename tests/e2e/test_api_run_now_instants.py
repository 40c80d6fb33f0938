"""Run now's instant and cancel through the real Airflow api-server app (test_api_auth's fixture:
simple auth manager, tokens, the action DAGs in Airflow's DB; no scheduler, so a run stays queued).

Issue 22: a far-future instant made a DAG run Airflow never starts (blocking the action's later runs),
an integer was read as a Unix time in 1969, and cancelling such a process left its queued run behind.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.e2e import test_api_auth as _auth
from tests.e2e.test_api_auth import CATALOG, Api

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

api = _auth.api  # the module-scoped api-server app with admin and viewer tokens
PATH = f"/tables/{CATALOG}.runs.t1/actions/expire-snapshots/runs"
DAG_ID = f"tms__{CATALOG}.runs.t1__expire-snapshots"


def _runs(dag_id: str = DAG_ID) -> list[Any]:
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    with create_session() as session:
        return [(r.run_id, r.state) for r in session.query(DagRun).filter(DagRun.dag_id == dag_id).all()]


@pytest.mark.parametrize(
    ("instant", "words"),
    [
        (-1615, "instant: -1615 is a number, not a time"),
        (1767225600, "instant: 1767225600 is a number, not a time"),
        ("2026-01-01T00:00:00", "instant: '2026-01-01T00:00:00' has no time zone"),
        ("9999-12-31T00:00:00+00:00", "instant: '9999-12-31T00:00:00+00:00' is in the future"),
        ("1999-01-01T00:00:00+00:00", "instant: '1999-01-01T00:00:00+00:00' is before the DAG's start date"),
    ],
)
def test_run_now_refuses_an_instant_outside_the_rule_with_a_422_naming_it(
    api: Api, instant: object, words: str
) -> None:
    before = _runs()
    r = api.call("POST", PATH, "admin", json={"instant": instant})
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["field"] in ("instant", "body.instant"), body
    assert words in body["detail"] and "allowed: an ISO 8601 time with a time zone" in body["detail"], body
    assert _runs() == before
    assert api.store.processes.list(table_id=f"{CATALOG}.runs.t1") == []  # nothing opened


def test_cancel_of_a_process_whose_run_is_queued_ends_the_run(api: Api) -> None:
    instant = (datetime.now(UTC) - timedelta(hours=1)).replace(microsecond=0).isoformat()
    made = api.call(
        "POST", f"/tables/{CATALOG}.runs.t2/actions/expire-snapshots/runs", "admin", json={"instant": instant}
    )
    assert made.status_code == 201, made.text
    out = made.json()
    dag_id = out["dag_id"]
    assert dict(_runs(dag_id))[out["run_id"]] == "queued"
    canceled = api.call("POST", f"/processes/{out['process_id']}/cancel", "admin")
    assert canceled.status_code == 200, canceled.text
    assert canceled.json()["status"] == "CANCELED"
    assert dict(_runs(dag_id))[out["run_id"]] == "failed"
    assert api.store.processes.get(out["process_id"]).status == "CANCELED"


@pytest.mark.parametrize(
    ("instant", "words"),
    [
        ("9999-12-31T00:00:00+00:00", "is in the future"),
        ("2026-01-01T00:00:00", "has no time zone"),
        ("-1615", "is not an ISO 8601 time"),
        ("1999-01-01T00:00:00+00:00", "is before the DAG's start date"),
    ],
)
def test_the_clis_run_now_applies_the_same_rule(
    tmp_path_factory: pytest.TempPathFactory, instant: str, words: str
) -> None:
    from tests.e2e.test_cli import ok, register, tablemgmt

    table_id = "clinow.db.t"
    if table_id not in tablemgmt("tables").stdout:
        ok(register(table_id, tmp_path_factory.mktemp("clinow") / "wh"))
    res = tablemgmt("run", table_id, "rewrite-files", "--instant", instant)
    out = res.stdout + res.stderr
    assert res.returncode != 0, out
    assert f"--instant: {instant!r} {words}" in out and "allowed: an ISO 8601 time with a time zone" in out, (
        out
    )
