"""A dynamic table's query through the real api-server (a separate ``airflow api-server`` process, the
simple auth manager, tokens from its ``/auth/token``): the user ``author`` has the role ``user``, which
may edit DAGs, so it may declare dynamic tables (issue 22's attacker).

Since issue 35 user SQL needs ``[tablemgmt] user_sql_authors`` (default ``role:admin``); here the rule
also names ``author``, the worst case: an allowed author who is hostile (the rule's own refusals are
``tests/e2e/test_api_dynamic.py``'s).

The api-server's environment holds a canary (``TMS_SECURITY_CANARY``) beside its JWT secret. Every
vector is POSTed as ``author``: the answer is a 202 (the definition stored CREATING, the creation left to
a worker) or the declaration's 422, and neither the canary, the JWT secret nor a planted file's content
is in any answer. On the old code the api-server ran the creation's Spark job itself and answered with
Spark's error text (the canary) or created the table from the file.

The worker's side: the refresh DAG's task (``airflow dags test``, the same operator a worker runs, with
the canary in its environment too) refuses a script transformation that would grep every process's
environment for the canary (issue 35: on the code before the allow-list it ran, with ``/bin/bash -c``,
and wrote the canary into the table) — and, on demand, the getenv query — from its analysed plan; the
process row a viewer reads holds a sanitized reason; no row of the store holds the canary.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.test_api_dynamic import CATALOG, DynamicApi, dynamic_api_server

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

CANARY = f"tms-canary-{secrets.token_hex(8)}"
FILE_CANARY = f"tms-file-canary-{secrets.token_hex(8)}"
USERS = {"admin": "admin-pw", "viewer": "viewer-pw", "author": "author-pw"}


@dataclass
class Server:
    api: DynamicApi
    secret_file: Path

    @property
    def secrets(self) -> tuple[str, ...]:
        return (CANARY, FILE_CANARY, self.api.dep.env["AIRFLOW__API_AUTH__JWT_SECRET"])

    def assert_clean(self, text: str) -> None:
        for secret in self.secrets:
            assert secret not in text, f"a secret leaked: {text[:2000]}"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    home = tmp_path_factory.mktemp("security") / "airflow"
    secret_file = home.parent / "secret.txt"
    secret_file.write_text(FILE_CANARY + "\n")
    api = dynamic_api_server(
        home,
        [],
        USERS,
        roles={"author": "user"},
        TMS_SECURITY_CANARY=CANARY,
        AIRFLOW__TABLEMGMT__USER_SQL_AUTHORS="role:admin, user:author",
    )
    try:
        yield Server(api, secret_file)
    finally:
        api.dep.stop()


def _definition(name: str, query: str) -> dict[str, object]:
    return {"identifier": f"{CATALOG}.sec.{name}", "query": query, "freshness": "1 DAY"}


# The vectors that are queries as far as the declaration's text check sees: the api-server stores them
# and runs nothing (on the old code it ran them in its own Spark job).
STORED = {
    "getenv_java_method": "SELECT CAST(raise_error(java_method('java.lang.System', 'getenv', 'TMS_SECURITY_CANARY')) AS STRING) AS x",
    "jwt_secret_reflect": "SELECT CAST(raise_error(reflect('java.lang.System', 'getenv', 'AIRFLOW__API_AUTH__JWT_SECRET')) AS STRING) AS x",
    "file_read": "SELECT value FROM text.`{secret_file}`",
    "command_after_with": "WITH c AS (SELECT 1 AS id) INSERT INTO restdt.db.victim SELECT id FROM c",
    "unregistered_catalog": "SELECT * FROM spark_catalog.default.anything",
}
# Commands the declaration refuses by their first word (the plan check refuses them again on the worker:
# tests/security/test_query_policy_spark.py).
REFUSED = {
    "add_jar": "ADD JAR /tmp/evil.jar",
    "create_function": "CREATE FUNCTION evil AS 'org.example.Evil' USING JAR '/tmp/evil.jar'",
}


@pytest.mark.parametrize("vector", list(STORED))
def test_the_api_server_stores_the_query_and_runs_none_of_it(server: Server, vector: str) -> None:
    query = STORED[vector].format(secret_file=server.secret_file)
    body = _definition(vector, query)
    denied = server.api.call("POST", "/dynamic-tables", "viewer", body)
    assert denied.status == 403, denied.body
    r = server.api.call("POST", "/dynamic-tables", "author", body)
    server.assert_clean(json.dumps(r.body))
    assert r.status == 202, r.body
    assert (r.body["state"], r.body["creation"]) == ("CREATING", "waiting for the DAG")
    got = server.api.call("GET", f"/dynamic-tables/{CATALOG}.sec.{vector}", "viewer")
    assert got.status == 200 and got.body["definition"]["query"] == query
    server.assert_clean(json.dumps(got.body))


@pytest.mark.parametrize("vector", list(REFUSED))
def test_a_command_is_refused_at_declaration(server: Server, vector: str) -> None:
    r = server.api.call("POST", "/dynamic-tables", "author", _definition(vector, REFUSED[vector]))
    assert r.status == 422, r.body
    assert "query" in r.body["detail"] and "no other statement" in r.body["detail"], r.body
    assert server.api.call("GET", f"/dynamic-tables/{CATALOG}.sec.{vector}", "viewer").status == 404


# What the worker's task runs: the getenv query of issue 22 (on demand: the same plan check refuses it
# through the real refresh job in tests/security/test_query_policy_spark.py) and issue 35's shell.
WORKER = {
    "transform": (
        "SELECT TRANSFORM(x) USING 'grep -ho TMS_SECURITY_CANARY=[a-z0-9-]* /proc/[0-9]*/environ; touch {marker}' "
        "AS (y) FROM (SELECT 'a' AS x)",
        "script transformation",
    ),
    "getenv": (STORED["getenv_java_method"], "reflection"),
}


@pytest.mark.parametrize(
    "vector",
    [
        "transform",
        pytest.param(
            "getenv",
            marks=pytest.mark.on_demand(
                reason="tests/security/test_query_policy_spark.py refuses reflection through the real refresh job"
            ),
        ),
    ],
)
def test_the_worker_refuses_the_query_and_stores_a_sanitized_reason(
    server: Server, vector: str, tmp_path: Path
) -> None:
    dep = server.api.dep
    name = f"worker_{vector}"
    table = f"{CATALOG}.sec.{name}"
    marker = tmp_path / "script-ran"
    query, refusal = WORKER[vector]
    # No retry: a refused query fails the same way every time, and `dags test` would wait out the delay.
    definition = {**_definition(name, query.format(marker=marker)), "retries": 0}
    r = server.api.call("POST", "/dynamic-tables", "author", definition)
    assert r.status == 202, r.body
    parsed = dep.cli("dags", "reserialize", timeout=600)
    assert parsed.returncode == 0, parsed.stderr[-3000:]
    dag_id = f"tms__{table}__refresh"
    # The refresh DAG's task, as a worker runs it (the canary is in this process's environment too).
    ran = dep.cli("dags", "test", dag_id, timeout=800)
    assert "QueryNotAllowed" in ran.stdout + ran.stderr, (ran.stdout[-3000:], ran.stderr[-3000:])
    assert not marker.exists(), "the script ran on the worker"
    history = server.api.call("GET", f"/dynamic-tables/{table}/history", "viewer")
    assert history.status == 200, history.body
    ((row,),) = [history.body]
    assert (row["state"], row["trigger"]) == ("FAILED", "CREATION"), row
    assert refusal in row["reason"] and "registered catalog" in row["reason"], row
    server.assert_clean(json.dumps(history.body))
    processes = server.api.call("GET", f"/processes?table={table}", "viewer")
    server.assert_clean(json.dumps(processes.body))
    _assert_store_clean(server)


def _assert_store_clean(server: Server) -> None:
    """No row of any table of the store holds a secret."""
    import sqlalchemy as sa

    engine = sa.create_engine(server.api.dep.env["TABLEMGMT_STORE_URL"], poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            for table in sa.inspect(conn).get_table_names():
                rows = conn.execute(sa.text(f'SELECT * FROM "{table}"')).fetchall()
                server.assert_clean(repr(rows))
    finally:
        engine.dispose()
