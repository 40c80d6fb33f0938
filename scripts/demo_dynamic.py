"""The demo's dynamic-table steps that need more than `airflow dags test` (called by scripts/demo.sh).

``rest TABLE --partition day=...``: start a real ``airflow api-server`` on the demo's home (the simple
auth manager, user ``admin`` with the password `make ui` uses), log in, pause every DAG (the maintenance
DAGs that `airflow dags test` left unpaused would start scheduled runs), show that the refresh endpoint
refuses a request without a token (401), ask FLIP-435's ``POST /tablemgmt/v1/dynamic-tables/{TABLE}/refresh``
for a manual refresh of one partition, unpause the refresh DAG through Airflow's own REST API and start
``airflow scheduler``, wait for the refresh's process (``jobId``) to finish in the store (and for any run
of the latest cron tick the unpause let the scheduler start), stop the scheduler, put every DAG's pause
flag back and stop the api-server. Fails unless the refresh ends SUCCESS with refresh action PARTITION.

``expect TABLE ACTION [ACTION ...] [--at ISO]``: fail unless the table's refresh at that schedule time
(default: the last one created) ended SUCCESS with one of the refresh actions given (FULL, PARTITION,
NO_DATA); print it.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from demo_report import ui_password  # noqa: E402

TERMINAL = ("SUCCESS", "FAILED", "KILLED", "CANCELED")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _request(method: str, url: str, body: Any = None, token: str | None = None) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data, headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw)
        except ValueError:
            return e.code, raw.decode(errors="replace")


def _store() -> Any:
    from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook

    return TableMgmtHook().get_store()


class Airflow:
    """api-server + scheduler, each leading its own process group so a stop reaches their workers."""

    def __init__(self, home: Path, port: int, password_file: Path) -> None:
        self.port = port
        self.logs = home / "demo-rest-logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.env = {
            **os.environ,
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__AUTH_MANAGER": (
                "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
            ),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(password_file),
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
            "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
            # Both components sign and check the same tokens.
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
        }
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, *args: str) -> None:
        with (self.logs / f"{name}.log").open("ab") as out:
            self.procs[name] = subprocess.Popen(
                ["airflow", name, *args],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        print(f"  started airflow {name} (pid {self.procs[name].pid}, log {self.logs / (name + '.log')})")

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                status, _ = _request("GET", f"http://127.0.0.1:{self.port}/api/v2/version")
                if status == 200:
                    return
            except OSError:
                pass
            dead = {n: p.returncode for n, p in self.procs.items() if p.poll() is not None}
            if dead:
                raise SystemExit(f"Airflow exited early: {dead}; see {self.logs}")
            if time.monotonic() > deadline:
                raise SystemExit(f"the api-server did not answer within {timeout:.0f} s; see {self.logs}")
            time.sleep(1)

    def stop(self, *names: str) -> None:
        """Stop ``names`` (default: every component started and still running)."""
        procs = {n: p for n, p in self.procs.items() if (not names or n in names) and p.returncode is None}
        for p in procs.values():
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 30
        for p in procs.values():
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(timeout=10)
            try:  # the group may outlive its leader (executor workers, spark-submit)
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if procs:
            print(f"  stopped {' and '.join(procs)}")


def _pairs(values: list[str]) -> dict[str, str]:
    out = {}
    for v in values:
        key, sep, value = v.partition("=")
        if not sep:
            raise SystemExit(f"--partition: {v!r} is not COLUMN=VALUE, e.g. day=2026-02-01")
        out[key] = value
    return out


def cmd_rest(args: argparse.Namespace) -> int:
    home = Path(os.environ["AIRFLOW_HOME"])
    password = ui_password(home)  # the manager's passwords file, shared with `make ui`
    port = args.port or _free_port()
    base = f"http://127.0.0.1:{port}"
    dag_id = f"tms__{args.table}__refresh"
    airflow = Airflow(home, port, home / "ui-passwords.json")
    try:
        airflow.start("api-server", "--port", str(port), "--host", "127.0.0.1")
        airflow.wait_ready(args.wait)
        status, body = _request("POST", f"{base}/auth/token", {"username": "admin", "password": password})
        if status != 201:
            raise SystemExit(f"login as admin failed: {status} {body}")
        token = body["access_token"]
        # Only the refresh DAG may run while the scheduler is up: the maintenance DAGs that
        # `airflow dags test` left unpaused would start their own scheduled runs. Their pause flags
        # are put back once the scheduler has stopped.
        unpaused = _unpaused_dags(base, token)
        _set_paused(base, token, None, True)
        try:
            _rest_refresh(base, token, args, airflow, dag_id)
        finally:
            airflow.stop("scheduler")
            for other in unpaused:
                _set_paused(base, token, other, False)
    finally:
        airflow.stop()
    return 0


def _unpaused_dags(base: str, token: str) -> list[str]:
    status, body = _request("GET", f"{base}/api/v2/dags?paused=false&limit=1000", token=token)
    if status != 200:
        raise SystemExit(f"could not list the DAGs: {status} {body}")
    return [d["dag_id"] for d in body["dags"]]


def _set_paused(base: str, token: str, dag_id: str | None, paused: bool) -> None:
    """Airflow's own REST API: pause or unpause one DAG, or (``dag_id`` None) every DAG."""
    if dag_id is None:
        url = f"{base}/api/v2/dags?dag_id_pattern=%25"
    else:
        url = f"{base}/api/v2/dags/{urllib.parse.quote(dag_id)}"
    status, body = _request("PATCH", url, {"is_paused": paused}, token)
    if status != 200:
        raise SystemExit(
            f"could not {'pause' if paused else 'unpause'} {dag_id or 'the DAGs'}: {status} {body}"
        )


def _refresh_runs_active(base: str, token: str, dag_id: str) -> list[str]:
    status, body = _request(
        "GET", f"{base}/api/v2/dags/{dag_id}/dagRuns?state=queued&state=running&limit=100", token=token
    )
    if status != 200:
        raise SystemExit(f"could not list the runs of {dag_id}: {status} {body}")
    return [r["dag_run_id"] for r in body["dag_runs"]]


def _rest_refresh(base: str, token: str, args: argparse.Namespace, airflow: Airflow, dag_id: str) -> None:
    refresh_url = f"{base}/tablemgmt/v1/dynamic-tables/{args.table}/refresh"
    request = {"isPeriodic": False, "staticPartitions": _pairs(args.partition)}
    status, body = _request("POST", refresh_url, request)
    print(f"  POST {refresh_url} without a token -> {status} {json.dumps(body)}")
    if status != 401:
        raise SystemExit("the refresh endpoint answered a request without a token with other than 401")
    started = time.perf_counter()
    status, body = _request("POST", refresh_url, request, token)
    took = time.perf_counter() - started
    print(f"  POST {refresh_url} {json.dumps(request)}")
    print(f"    -> {status} in {took * 1000:.0f} ms (the api-server's first call): {json.dumps(body)}")
    if status != 200:
        raise SystemExit(f"the refresh was not submitted: {status} {body}")
    job = int(body["jobId"])
    _set_paused(base, token, dag_id, False)
    airflow.start("scheduler")
    print(f"  unpaused {dag_id} (PATCH /api/v2/dags); the scheduler runs DAG run {body['dagRunId']}")
    store = _store()
    deadline = time.monotonic() + args.wait
    seen = ""
    while True:
        process = store.processes.get(job)
        if str(process.status) != seen:
            seen = str(process.status)
            print(f"    process {job}: {seen}")
        if seen in TERMINAL:
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"process {job} still {seen} after {args.wait:.0f} s; see {airflow.logs}")
        time.sleep(2)
    # Unpausing also lets the scheduler start the run of the latest cron tick; let it finish rather
    # than stop it half-way.
    while active := _refresh_runs_active(base, token, dag_id):
        if time.monotonic() > deadline:
            raise SystemExit(
                f"{dag_id} runs {active} still active after {args.wait:.0f} s; see {airflow.logs}"
            )
        time.sleep(2)
    _set_paused(base, token, dag_id, True)
    if seen != "SUCCESS":
        raise SystemExit(f"the REST refresh {job} ended {seen}: {process.failure_reason}")
    s = process.summary or {}
    if s.get("refresh_action") != "PARTITION":
        raise SystemExit(
            f"the REST refresh {job} of {request['staticPartitions']} did {s.get('refresh_action')}"
        )
    print(
        f"  refresh {job}: {s.get('refresh_action')} of {s.get('partitions_written')}, "
        f"{s.get('rows_written')} rows, Spark application {s.get('application_id')}"
    )


def cmd_expect(args: argparse.Namespace) -> int:
    from airflow_tablemgmt.services import dynamic

    store = _store()
    if args.at:
        from datetime import datetime

        found = store.processes.find(args.table, "refresh", datetime.fromisoformat(args.at))
        if found is None:
            raise SystemExit(f"{args.table} has no refresh at {args.at}; expected {' or '.join(args.action)}")
    else:  # the newest by creation: a manual refresh's instant is "now", later than schedule times
        refreshes = dynamic.history(store, args.table, 1000)
        if not refreshes:
            raise SystemExit(f"{args.table} has no refresh yet; expected {' or '.join(args.action)}")
        found = max(refreshes, key=lambda p: p.id)
    row = dynamic.history_row(found)
    print(
        f"  refresh {row['process_id']}: {row['state']} {row['refresh_action']} "
        f"({row['rows_written']} rows; sources {row['source_snapshots']})"
    )
    if row.get("refresh_mode"):
        print(f"  mode {row['refresh_mode']}: {row.get('refresh_mode_reason') or '-'}")
    if row["state"] != "SUCCESS" or row["refresh_action"] not in args.action:
        raise SystemExit(
            f"expected the newest refresh of {args.table} to be SUCCESS {' or '.join(args.action)}, got "
            f"{row['state']} {row['refresh_action']}: {row['reason']}"
        )
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    rest = sub.add_parser("rest", help="a refresh through the REST endpoint of a real api-server")
    rest.add_argument("table")
    rest.add_argument("--partition", action="append", default=[], metavar="COLUMN=VALUE")
    rest.add_argument("--port", type=int, default=0, help="the api-server's port (default: a free one)")
    rest.add_argument("--wait", type=float, default=float(os.environ.get("DEMO_REST_WAIT", "600")))
    rest.set_defaults(func=cmd_rest)
    expect = sub.add_parser("expect", help="fail unless the newest refresh is SUCCESS with ACTION")
    expect.add_argument("table")
    expect.add_argument("action", nargs="+", choices=["FULL", "PARTITION", "INCREMENTAL", "NO_DATA"])
    expect.add_argument("--at", help="the refresh at this schedule time (ISO 8601); default: the newest")
    expect.set_defaults(func=cmd_expect)
    args = p.parse_args()
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
