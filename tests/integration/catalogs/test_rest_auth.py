"""OAuth2 client credentials and vended credentials against Iceberg's reference REST catalog server.

What the server does (iceberg-open-api 1.10.1's ``RESTCatalogServer``; ``RESTCatalogAdapter`` in
Iceberg's core test sources): ``POST /v1/oauth/tokens`` with ``grant_type=client_credentials`` answers a
bearer token ``client-credentials-token:sub=<client_id>`` **without checking the secret**, and no other
route checks the ``Authorization`` header; with ``include-credentials`` (``CATALOG_INCLUDE__CREDENTIALS``)
its ``RESTServerCatalogAdapter`` puts its own S3 keys into every table's load response (``config``), which
is how a REST catalog vends credentials (static keys here, not STS). So these tests prove the client side,
watched through a recording proxy in front of the server: a catalog whose ``credential`` is a secret
*reference* gets a token with that client id and secret from both pyiceberg (the readers) and Spark (the
job), every later request carries it, and the secret appears in no log; a catalog that declares no S3
keys, only ``header.X-Iceberg-Access-Delegation: vended-credentials``, reads and rewrites its tables with
the keys the server vends. That the server would *refuse* a wrong secret is not provable with this server.

CI runs the pyiceberg side; the Spark side (one spark-submit each) runs with TABLEMGMT_CATALOG_MATRIX=1.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest

from airflow_tablemgmt.core.tables import CatalogSpec, CatalogType
from airflow_tablemgmt.hooks.secrets import resolve_catalog_spec
from airflow_tablemgmt.metadata.iceberg import SnapshotReader
from tests.support.catalogs import content, run, s3_properties, seed
from tests.support.servers import ACCESS_KEY, REGION, SECRET_KEY, IcebergRestServer, SeaweedS3

pytestmark = [pytest.mark.integration]
MATRIX = os.environ.get("TABLEMGMT_CATALOG_MATRIX") == "1"
CLIENT_ID = "tms-client"
CLIENT_SECRET = "oauth-secret-canary-7f3a9c"
CREDENTIAL_REF = "env:TMS_TEST_REST_CREDENTIAL"
_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    status: int
    answer: bytes
    encoding: str = ""

    def json(self) -> Any:
        """The answer's JSON (the server gzips what the client accepts gzipped)."""
        import gzip

        return json.loads(gzip.decompress(self.answer) if self.encoding == "gzip" else self.answer)


@dataclass
class RecordingProxy:
    """A reverse proxy that forwards every request to ``upstream`` and records it with its answer."""

    upstream: tuple[str, int]
    seen: list[Seen] = field(default_factory=list)

    def start(self) -> RecordingProxy:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _handle(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                conn = http.client.HTTPConnection(*proxy.upstream, timeout=120)
                try:
                    conn.request(self.command, self.path, body=body or None, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                finally:
                    conn.close()
                proxy.seen.append(
                    Seen(
                        self.command,
                        self.path,
                        headers,
                        body,
                        resp.status,
                        data,
                        resp.getheader("Content-Encoding") or "",
                    )
                )
                self.send_response(resp.status, resp.reason)
                for k, v in resp.getheaders():
                    if k.lower() not in _HOP and k.lower() != "content-length":
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_HEAD = do_DELETE = do_PUT = _handle  # noqa: N815

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def tokens(self) -> list[Seen]:
        return [
            s for s in self.seen if s.method == "POST" and s.path.rstrip("/").endswith("/v1/oauth/tokens")
        ]

    def catalog_calls(self) -> list[Seen]:
        return [s for s in self.seen if "/oauth/" not in s.path]


@pytest.fixture(scope="module", autouse=True)
def _secrets_in_the_workers_environment() -> Iterator[None]:
    keys = ("TMS_TEST_S3_KEY_ID", "TMS_TEST_S3_SECRET", "TMS_TEST_REST_CREDENTIAL")
    aws = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE")
    saved = {k: os.environ.get(k) for k in (*keys, *aws)}
    for k in aws:  # no ambient AWS credentials: vended keys must be the only ones a reader can use
        os.environ.pop(k, None)
    os.environ.update(
        TMS_TEST_S3_KEY_ID=ACCESS_KEY,
        TMS_TEST_S3_SECRET=SECRET_KEY,
        TMS_TEST_REST_CREDENTIAL=f"{CLIENT_ID}:{CLIENT_SECRET}",
    )
    os.environ.setdefault("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "local[2]"}')
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="module")
def rest(tmp_path_factory: pytest.TempPathFactory, s3: SeaweedS3) -> Iterator[IcebergRestServer]:
    server = IcebergRestServer(
        tmp_path_factory.mktemp("rest"), s3, extra_env={"CATALOG_INCLUDE__CREDENTIALS": "true"}
    ).start()
    yield server
    server.stop()


@pytest.fixture
def proxy(rest: IcebergRestServer) -> Iterator[RecordingProxy]:
    p = RecordingProxy(("127.0.0.1", rest.port)).start()
    yield p
    p.stop()


def _oauth_catalog(proxy: RecordingProxy, s3: SeaweedS3) -> CatalogSpec:
    return CatalogSpec(
        name="oauthlake",
        type=CatalogType.REST,
        properties={"uri": proxy.uri, "credential": CREDENTIAL_REF, "scope": "catalog", **s3_properties(s3)},
    )


def _vended_catalog(proxy: RecordingProxy, s3: SeaweedS3) -> CatalogSpec:
    # No S3 key, no reference to one: only the endpoint, the region and the request for vended credentials.
    return CatalogSpec(
        name="vendlake",
        type=CatalogType.REST,
        properties={
            "uri": proxy.uri,
            "s3.endpoint": s3.endpoint,
            "client.region": REGION,
            "header.X-Iceberg-Access-Delegation": "vended-credentials",
        },
    )


def _from(seen: Seen, client: str) -> bool:
    """Whether pyiceberg (User-Agent PyIceberg/...) or Iceberg's Java client (any other) sent ``seen``."""
    python = seen.headers.get("User-Agent", "").lower().startswith("pyiceberg")
    return python if client == "pyiceberg" else not python


def _assert_token_flow(proxy: RecordingProxy, client: str) -> None:
    """``client`` (pyiceberg or java) asked for a token with the referenced id and secret, and every
    catalog call it made afterwards carried that token."""
    asked = [t for t in proxy.tokens() if _from(t, client)]
    assert asked, (client, [(t.path, t.headers.get("User-Agent")) for t in proxy.tokens()])
    form = {k: v[0] for k, v in parse_qs(asked[0].body.decode()).items()}
    assert form["grant_type"] == "client_credentials", form
    assert (form["client_id"], form["client_secret"]) == (CLIENT_ID, CLIENT_SECRET)
    assert (
        asked[0].status == 200
        and asked[0].json()["access_token"] == f"client-credentials-token:sub={CLIENT_ID}"
    )
    calls = [c for c in proxy.catalog_calls() if _from(c, client)]
    calls = [c for c in calls if not c.path.rstrip("/").endswith("/v1/config")]
    assert calls, f"{client} made no catalog call"
    bearer = f"Bearer client-credentials-token:sub={CLIENT_ID}"
    assert {c.headers.get("Authorization") for c in calls} == {bearer}, [
        (c.method, c.path, c.headers.get("Authorization")) for c in calls
    ]


@pytest.mark.timeout(600)
def test_pyiceberg_gets_an_oauth2_token_from_a_credential_reference(
    proxy: RecordingProxy, s3: SeaweedS3, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    catalog = _oauth_catalog(proxy, s3)
    table = seed(catalog, f"oauth_{uuid.uuid4().hex[:6]}", appends=3)
    assert content(catalog, table)[:3] == (30, sum(range(30)), 3)
    # The product's reader (gate, watcher, health) goes through the same token flow.
    state = SnapshotReader(resolve_catalog_spec(catalog)).current_state(table)
    assert state.snapshot_id is not None
    _assert_token_flow(proxy, "pyiceberg")
    assert CLIENT_SECRET not in caplog.text
    # What the product keeps of the catalog holds the reference, never its value.
    assert CLIENT_SECRET not in catalog.model_dump_json() and CREDENTIAL_REF in catalog.model_dump_json()


@pytest.mark.timeout(600)
def test_pyiceberg_reads_and_writes_with_vended_credentials(proxy: RecordingProxy, s3: SeaweedS3) -> None:
    catalog = _vended_catalog(proxy, s3)
    table = seed(catalog, f"vend_{uuid.uuid4().hex[:6]}", appends=3)
    assert content(catalog, table)[:3] == (30, sum(range(30)), 3)
    assert SnapshotReader(resolve_catalog_spec(catalog)).current_state(table).snapshot_id is not None
    loads = [c for c in proxy.catalog_calls() if c.method == "GET" and f"/tables/{table.name}" in c.path]
    assert loads, [c.path for c in proxy.seen]
    # The client asked for delegation, and the server's load answers carried the keys it used.
    assert {c.headers.get("X-Iceberg-Access-Delegation") for c in loads} == {"vended-credentials"}
    config = loads[-1].json()["config"]
    assert config.get("s3.access-key-id") == ACCESS_KEY and "s3.secret-access-key" in config


@pytest.mark.catalog_matrix
@pytest.mark.timeout(900)
@pytest.mark.skipif(
    not MATRIX, reason="the Spark side of the REST auth tests runs with TABLEMGMT_CATALOG_MATRIX=1"
)
def test_spark_job_gets_an_oauth2_token_and_no_secret_is_logged(
    proxy: RecordingProxy, s3: SeaweedS3, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    catalog = _oauth_catalog(proxy, s3)
    table = seed(catalog, f"oauthspark_{uuid.uuid4().hex[:6]}", appends=4)
    rows, checksum, _, _ = content(catalog, table)
    proxy.seen.clear()
    result = run(catalog, table, "rewrite-files", {"min-input-files": 2})
    assert result.summary["after"]["data_files"] == 1
    assert content(catalog, table)[:3] == (rows, checksum, 1)
    _assert_token_flow(proxy, "java")  # Iceberg's Java REST client in the Spark job
    # spark-submit's output (the driver's log, through the Spark provider's hook) and ours hold no secret.
    assert "rewrite" in caplog.text.lower() or caplog.records, "nothing was logged: the check would be empty"
    assert CLIENT_SECRET not in caplog.text and SECRET_KEY not in caplog.text
    assert CLIENT_SECRET not in json.dumps(result.summary, default=str)


@pytest.mark.catalog_matrix
@pytest.mark.timeout(900)
@pytest.mark.skipif(
    not MATRIX, reason="the Spark side of the REST auth tests runs with TABLEMGMT_CATALOG_MATRIX=1"
)
def test_spark_job_rewrites_with_vended_credentials(
    proxy: RecordingProxy, s3: SeaweedS3, tmp_path: Path
) -> None:
    catalog = _vended_catalog(proxy, s3)
    table = seed(catalog, f"vendspark_{uuid.uuid4().hex[:6]}", appends=4)
    rows, checksum, _, _ = content(catalog, table)
    result = run(catalog, table, "rewrite-files", {"min-input-files": 2})
    assert result.summary["after"]["data_files"] == 1
    assert content(catalog, table)[:3] == (rows, checksum, 1)
    java = [
        c
        for c in proxy.catalog_calls()
        if c.headers.get("User-Agent", "").lower().startswith("apache-httpclient")
    ]
    assert {c.headers.get("X-Iceberg-Access-Delegation") for c in java if "/tables/" in c.path} == {
        "vended-credentials"
    }
