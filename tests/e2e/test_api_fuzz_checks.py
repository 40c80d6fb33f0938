"""schemathesis's own command line against a live server, as an outside tester runs it: every phase (the
document's examples, the coverage phase — boundary values, methods the document does not list, missing
parameters —, fuzzing and the stateful phase) and every check (``--checks all``: conformance,
``unsupported_method`` with its ``Allow`` header, ``negative_data_rejection``, ``missing_required_header``,
``not_a_server_error`` ...), on a SQLite and a PostgreSQL store. The server is the real Airflow api-server
app (simple auth manager, an admin's token) served by uvicorn on a free port.

tests/e2e/test_api_fuzz.py is the short CI run of the conformance checks; this is the longer run, on demand
(``TABLEMGMT_FULL=1``; ``TABLEMGMT_FUZZ_CHECKS_EXAMPLES`` examples per operation, default 50). The run's
summary (requests, failures per check) is printed; the JUnit report is kept in the test's tmp dir."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.api_app import build_app, configure_airflow, login
from tests.e2e.store_backends import BACKENDS, store_url

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(3600),
    pytest.mark.on_demand(
        reason="schemathesis's CLI with every phase and check on both stores (test_api_fuzz.py runs in CI)"
    ),
]

EXAMPLES = int(os.environ.get("TABLEMGMT_FUZZ_CHECKS_EXAMPLES", "50"))
# Checks that judge what the document cannot express, excluded with the reason:
# - positive_data_acceptance: a schema-valid request may meet the store's state (404 unknown table, 409 a
#   conflict, FLIP-435's 400 for a periodic refresh without its time): declared answers, not rejections.
# - ignored_auth / use_after_free / ensure_resource_availability / object_level_authorization: need an
#   auth scheme in the document (Airflow's plugin apps take Airflow's JWT, not declared) or links.
EXCLUDED = ("positive_data_acceptance",)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module", params=BACKENDS)
def live(
    request: pytest.FixtureRequest, airflow_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str, Path]]:
    import uvicorn
    from fastapi.testclient import TestClient

    from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook
    from airflow_tablemgmt.services import RegisterRequest, build_catalog, register_table, set_catalog

    tmp = tmp_path_factory.mktemp(f"fuzzcli-{request.param}")
    configure_airflow(tmp)
    with store_url(request.param, tmp):
        store = TableMgmtHook().get_store()
        set_catalog(store, build_catalog("lake", warehouse=str(tmp / "wh")))
        register_table(store, RegisterRequest(table="lake.sales.orders", actions=["rewrite-files"]))
        app = build_app()
        with TestClient(app) as client:
            token = login(client, "admin")
        port = _free_port()
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 60
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
            time.sleep(0.1)
        try:
            yield f"http://127.0.0.1:{port}", token, tmp
        finally:
            server.should_exit = True
            thread.join(30)


def test_schemathesis_cli_every_phase_and_check(live: tuple[str, str, Path]) -> None:
    base, token, tmp = live
    junit = tmp / "schemathesis.xml"
    cmd = [
        str(Path(sys.executable).with_name("schemathesis")),
        "run",
        f"{base}/tablemgmt/v1/openapi.json",
        "--header",
        f"Authorization: Bearer {token}",
        "--checks",
        "all",
        "--exclude-checks",
        ",".join(EXCLUDED),
        "--max-examples",
        str(EXAMPLES),
        "--seed",
        "35",
        "--workers",
        "1",
        "--report",
        "junit",
        "--report-junit-path",
        str(junit),
        "--no-color",
    ]
    started = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=3300)
    out = done.stdout + done.stderr
    # the run's own summary: phases, operations, test cases, failures per check
    tail = [line for line in out.splitlines() if line.strip() and not line.startswith("20")]
    print(f"schemathesis CLI in {time.monotonic() - started:.0f} s:\n" + "\n".join(tail[-40:]))
    assert done.returncode == 0, out[-6000:]
