"""FLIP-435's REST refresh through a real ``airflow api-server`` (a separate process, the simple auth
manager, users admin and viewer, tokens from its ``/auth/token``): 401 without a token, 403 for a
viewer (no run permission on the table's refresh DAG), 200 with the job for an admin; the DAG run is
in Airflow's DB with the refresh's conf; the same periodic schedule time twice is the same job and one
run; a periodic refresh without a schedule time is a 400 with Flink's message. The lifecycle routes
(suspend, resume, alter, drop) answer 401/403/200 the same way, and suspend / resume set Airflow's own
pause flag on the refresh DAG.

No scheduler runs here: the refresh is *submitted* (process PENDING, DAG run queued) when the API
answers. ``make demo`` runs one to the end under a scheduler. ``benchmarks/dt_refresh.py`` reuses
:func:`dynamic_api_server` to time the endpoint.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import ROOT
from tests.e2e.test_real_scheduler import AirflowDeployment, local_deployment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

CATALOG = "restdt"
TABLE = f"{CATALOG}.agg.daily"
DAG_ID = f"tms__{TABLE}__refresh"
PASSWORDS = {"admin": "admin-pw", "viewer": "viewer-pw"}
FLINK_PERIODIC = "Schedule time must be specified for periodic refresh."


def definition(table_id: str = TABLE) -> dict[str, Any]:
    return {
        "identifier": table_id,
        "query": f"SELECT day, count(*) AS events FROM {CATALOG}.db.events GROUP BY day",
        "freshness": "1 DAY",
        "partitioned-by": ["day"],
        "partition.fields.day.date-formatter": "yyyy-MM-dd",
    }


@dataclass
class Response:
    status: int
    body: Any


@dataclass
class DynamicApi:
    """A running api-server and its users' tokens."""

    dep: AirflowDeployment
    tokens: dict[str, str]

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.dep.api_port}"

    def call(
        self,
        method: str,
        path: str,
        user: str | None = None,
        body: Any = None,
        cookie: bool = False,
        prefix: str = "/tablemgmt/v1",
    ) -> Response:
        headers = {"Content-Type": "application/json"}
        if user is not None:
            if cookie:
                headers["Cookie"] = f"_token={self.tokens[user]}"
            else:
                headers["Authorization"] = f"Bearer {self.tokens[user]}"
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + prefix + path, data, headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return Response(r.status, json.loads(r.read() or b"null"))
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                return Response(e.code, json.loads(raw))
            except ValueError:
                return Response(e.code, raw.decode(errors="replace"))


def _post_json(url: str, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        return dict(json.loads(r.read()))


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def dynamic_api_server(
    home: Path,
    tables: list[str],
    users: dict[str, str] = PASSWORDS,
    roles: dict[str, str] | None = None,
    **env: str,
) -> DynamicApi:
    """An api-server on a fresh Airflow home whose store holds the ACTIVE dynamic tables ``tables``
    (catalog ``restdt``) and whose DB holds their refresh DAGs (parsed from the DAG file), with the
    simple auth manager's ``users`` (admin is an admin, any other user a viewer unless ``roles`` names
    its role) logged in; ``env`` adds environment entries to every Airflow process.

    Nothing Spark: a refresh submitted through this server stays queued (no scheduler runs)."""
    from airflow_tablemgmt.core.dynamic import DynamicTableSpec
    from airflow_tablemgmt.core.tables import CatalogSpec, Owner
    from airflow_tablemgmt.store import Store

    pw_file = home.parent / "passwords.json"
    home.parent.mkdir(parents=True, exist_ok=True)
    pw_file.write_text(json.dumps(users))
    dep = local_deployment(
        home,
        AIRFLOW__CORE__AUTH_MANAGER="airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
        AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS=",".join(
            f"{u}:{(roles or {}).get(u, 'admin' if u == 'admin' else 'viewer')}" for u in users
        ),
        AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE=str(pw_file),
        AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS="False",
        **env,
    )
    try:
        migrated = dep.cli("db", "migrate", timeout=600)
        assert migrated.returncode == 0, migrated.stderr[-3000:]
        store = Store(dep.env["TABLEMGMT_STORE_URL"])
        try:
            store.catalogs.upsert(CatalogSpec(name=CATALOG, warehouse=str(home / "warehouse")), Owner.STORE)
            for table_id in tables:
                spec = DynamicTableSpec.model_validate(definition(table_id))
                store.dynamic.upsert(spec, Owner.STORE, state="ACTIVE")
        finally:
            store.dispose()
        (home / "dags" / "tablemgmt_dags.py").write_text((ROOT / "dags" / "tablemgmt_dags.py").read_text())
        parsed = dep.cli("dags", "reserialize", timeout=600)
        assert parsed.returncode == 0, parsed.stdout[-2000:] + parsed.stderr[-3000:]
        dep.start("api-server", "api-server", "--port", str(dep.api_port), "--host", "127.0.0.1")
        deadline = time.monotonic() + 300
        while not _answers(f"http://127.0.0.1:{dep.api_port}/api/v2/version"):
            dep.check_alive()
            assert time.monotonic() < deadline, "the api-server did not answer within 300 s"
            time.sleep(1)
        tokens = {
            u: str(
                _post_json(f"http://127.0.0.1:{dep.api_port}/auth/token", {"username": u, "password": pw})[
                    "access_token"
                ]
            )
            for u, pw in users.items()
        }
    except BaseException:
        dep.print_log_tails()
        dep.stop()
        raise
    return DynamicApi(dep, tokens)


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DynamicApi]:
    server = dynamic_api_server(
        tmp_path_factory.mktemp("dtapi") / "airflow",
        [TABLE, f"{CATALOG}.agg.lifecycle"],
        users={**PASSWORDS, "editor": "editor-pw"},
        roles={"editor": "user"},  # Airflow's DAG editor: may edit and trigger DAGs
    )
    try:
        yield server
    finally:
        server.dep.stop()


def _runs(api: DynamicApi, dag_id: str = DAG_ID) -> list[tuple[str, str, dict[str, Any]]]:
    rows = api.dep.query(
        "SELECT run_id, logical_date, conf FROM dag_run WHERE dag_id = :d ORDER BY id", d=dag_id
    )
    out = []
    for run_id, logical, conf in rows:
        if isinstance(conf, bytes | str):
            try:
                conf = json.loads(conf)
            except ValueError:  # Airflow keeps conf as JSON; older dialects as a pickled blob
                conf = {}
        out.append((str(run_id), str(logical), dict(conf or {})))
    return out


def test_refresh_is_401_without_a_token_403_for_a_viewer_and_200_for_an_admin(api: DynamicApi) -> None:
    body = {"isPeriodic": True, "scheduleTime": "2026-02-02 00:00:00"}
    path = f"/dynamic-tables/{TABLE}/refresh"
    anon = api.call("POST", path, None, body)
    assert anon.status == 401, anon.body
    assert anon.body["field"] == "authorization"
    for cookie in (False, True):
        viewer = api.call("POST", path, "viewer", body, cookie=cookie)
        assert viewer.status == 403, viewer.body
        assert viewer.body["field"] == "permission"
    assert _runs(api) == []
    admin = api.call("POST", path, "admin", body)
    assert admin.status == 200, admin.body
    out = admin.body
    assert set(out) == {"jobId", "dagRunId", "clusterInfo"}
    assert out["clusterInfo"]["master"] == "local[2]"  # the deployment's spark_default
    ((run_id, logical, conf),) = _runs(api)
    assert run_id == out["dagRunId"]
    assert logical.startswith("2026-02-02 00:00:00") or logical.startswith("2026-02-02T00:00:00")
    assert conf["is_periodic"] is True and conf["trigger"] == "MANUAL"


def test_the_same_periodic_schedule_time_twice_is_the_same_job_and_one_run(api: DynamicApi) -> None:
    body = {"isPeriodic": True, "scheduleTime": "2026-03-01 00:00:00"}
    path = f"/dynamic-tables/{TABLE}/refresh"
    first = api.call("POST", path, "admin", body)
    again = api.call("POST", path, "admin", body)
    assert first.status == again.status == 200, again.body
    assert again.body["jobId"] == first.body["jobId"]
    assert again.body["dagRunId"] == first.body["dagRunId"]
    assert [r for r in _runs(api) if r[0] == first.body["dagRunId"]] and len(
        [r for r in _runs(api) if "2026-03-01" in r[1]]
    ) == 1


def test_a_run_airflow_already_has_at_the_schedule_time_becomes_the_jobs_run(api: DynamicApi) -> None:
    """A run of the refresh DAG at the schedule time may exist before anyone asks for it over REST (the
    scheduler's own, or one made through Airflow's API, as here): the refresh is then that run (its
    process opened now), not an error and not a second run."""
    made = api.call(
        "POST",
        f"/dags/{DAG_ID}/dagRuns",
        "admin",
        {"dag_run_id": "earlier__2026-04-01", "logical_date": "2026-04-01T00:00:00+00:00"},
        prefix="/api/v2",
    )
    assert made.status == 200, made.body
    r = api.call(
        "POST",
        f"/dynamic-tables/{TABLE}/refresh",
        "admin",
        {"isPeriodic": True, "scheduleTime": "2026-04-01 00:00:00"},
    )
    assert r.status == 200, r.body
    assert r.body["dagRunId"] == "earlier__2026-04-01"
    assert [run for run in _runs(api) if "2026-04-01" in run[1]][0][0] == "earlier__2026-04-01"
    assert len([run for run in _runs(api) if "2026-04-01" in run[1]]) == 1


def test_periodic_refresh_without_schedule_time_is_400_with_flinks_message(api: DynamicApi) -> None:
    before = _runs(api)
    r = api.call("POST", f"/dynamic-tables/{TABLE}/refresh", "admin", {"isPeriodic": True})
    assert r.status == 400, r.body
    assert r.body["detail"] == FLINK_PERIODIC and r.body["field"] == "scheduleTime"
    assert _runs(api) == before


def test_reads_need_a_user_and_a_viewer_may_read(api: DynamicApi) -> None:
    for path in ("/dynamic-tables", f"/dynamic-tables/{TABLE}", f"/dynamic-tables/{TABLE}/history"):
        assert api.call("GET", path).status == 401
        r = api.call("GET", path, "viewer")
        assert r.status == 200, r.body
    got = api.call("GET", f"/dynamic-tables/{TABLE}", "viewer").body
    assert (got["state"], got["freshness"], got["cron"], got["paused"]) == (
        "ACTIVE",
        "1 DAY",
        "0 0 * * *",
        False,
    )
    assert got["last_refresh"]["state"] == "PENDING"


def _paused(api: DynamicApi, dag_id: str) -> bool:
    ((paused,),) = api.dep.query("SELECT is_paused FROM dag WHERE dag_id = :d", d=dag_id)
    return bool(paused)


def test_lifecycle_auth_matrix_and_airflows_pause_flag(api: DynamicApi) -> None:
    table = f"{CATALOG}.agg.lifecycle"
    dag_id = f"tms__{table}__refresh"
    steps: list[tuple[str, str, Any, str]] = [
        ("POST", f"/dynamic-tables/{table}/suspend", None, "SUSPENDED"),
        (
            "POST",
            f"/dynamic-tables/{table}/resume",
            {"dynamic_options": {"spark.sql.shuffle.partitions": "4"}},
            "ACTIVE",
        ),
        ("PATCH", f"/dynamic-tables/{table}", {"freshness": "1 HOUR"}, "ACTIVE"),
    ]
    for method, path, body, state in steps:
        assert api.call(method, path, None, body).status == 401
        denied = api.call(method, path, "viewer", body)
        assert denied.status == 403, (path, denied.body)
        ok = api.call(method, path, "admin", body)
        assert ok.status == 200, (path, ok.body)
        assert ok.body["state"] == state
        assert _paused(api, dag_id) is (state == "SUSPENDED")
    assert ok.body["cron"] == "0 * * * *"
    again = api.call("POST", f"/dynamic-tables/{table}/resume", "admin")
    assert again.status == 409 and "not suspended" in again.body["detail"]
    assert api.call("DELETE", f"/dynamic-tables/{table}", None).status == 401
    assert api.call("DELETE", f"/dynamic-tables/{table}", "viewer").status == 403
    dropped = api.call("DELETE", f"/dynamic-tables/{table}", "admin")
    assert dropped.status == 200 and dropped.body == {"table": table, "dropped": True, "purged": False}
    assert _paused(api, dag_id) is True  # the workflow goes first
    assert api.call("GET", f"/dynamic-tables/{table}", "viewer").status == 404


def test_only_user_sql_authors_may_create_alter_or_refresh_with_options(api: DynamicApi) -> None:
    """A ``user``-role editor may edit and trigger the refresh DAG, but writing user SQL needs
    ``[tablemgmt] user_sql_authors`` (default: admins): 403 naming it, nothing stored or queued."""
    new = f"{CATALOG}.agg.by_editor"
    options = {"dynamicOptions": {"spark.sql.shuffle.partitions": "4"}}
    denied = [
        ("POST", "/dynamic-tables", definition(new)),
        ("PATCH", f"/dynamic-tables/{TABLE}", {"freshness": "1 HOUR"}),
        ("POST", f"/dynamic-tables/{TABLE}/refresh", {**options, "scheduleTime": "2026-05-02 00:00:00"}),
    ]
    runs = _runs(api)
    for method, path, body in denied:
        r = api.call(method, path, "editor", body)
        assert r.status == 403, (path, r.body)
        assert r.body["field"] == "permission", r.body
        assert "[tablemgmt] user_sql_authors = role:admin" in r.body["detail"], r.body
        assert "'editor' (roles: user)" in r.body["detail"], r.body
    assert api.call("GET", f"/dynamic-tables/{new}", "admin").status == 404
    assert api.call("GET", f"/dynamic-tables/{TABLE}", "admin").body["freshness"] == "1 DAY"
    assert _runs(api) == runs
    # The reviewed query, refreshed without options: the DAG's run permission is enough.
    plain = api.call(
        "POST",
        f"/dynamic-tables/{TABLE}/refresh",
        "editor",
        {"isPeriodic": True, "scheduleTime": "2026-05-01 00:00:00"},
    )
    assert plain.status == 200, plain.body
    created = api.call("POST", "/dynamic-tables", "admin", definition(new))
    assert created.status == 202, created.body
