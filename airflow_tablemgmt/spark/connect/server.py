"""Launching a local Spark Connect server (``make connect``, ``scripts/connect.sh``, the tests).

The server is ``spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer`` with the
``spark-connect_2.12`` jar as its application and the Iceberg runtime (plus whatever the catalogs need)
as ``--jars``, all resolved by ``spark/launch/artifacts.py`` into local files: never ``--packages``.
Iceberg's SQL extensions are a static setting, so they are set here, on the server; the catalogs are
not: each job sets its own catalog on its own session (``session.py``). No pyspark at import.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from airflow_tablemgmt.core.secrets import SENSITIVE_REGEX
from airflow_tablemgmt.spark.conf import ICEBERG_EXTENSIONS, spark_home

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
PORT_CONF = "spark.connect.grpc.binding.port"
DEFAULT_PORT = 15002


@dataclass(frozen=True)
class ServerSpec:
    """One Connect server: its jars (the first is the ``spark-connect`` jar), port, master and extra conf."""

    connect_jar: str
    jars: tuple[str, ...] = ()
    port: int = DEFAULT_PORT
    master: str = "local[*]"
    conf: dict[str, str] = field(default_factory=dict)
    driver_memory: str = "1g"
    #: The server's web UI port: its REST status API is where a job's cost is read (``cost.py``). None: no UI
    #: (and no cost per job).
    ui_port: int | None = None

    def settings(self) -> dict[str, str]:
        ui = (
            {"spark.ui.enabled": "false"}
            if self.ui_port is None
            # Read-only: nothing can kill a job or a stage from the UI (``spark.ui.killEnabled``); its SQL pages
            # show each session's settings, a job's catalog among them: redacted by the project's own rule.
            else {
                "spark.ui.enabled": "true",
                "spark.ui.port": str(self.ui_port),
                "spark.ui.killEnabled": "false",
                "spark.redaction.regex": SENSITIVE_REGEX,
            }
        )
        return {
            "spark.sql.extensions": ICEBERG_EXTENSIONS,
            PORT_CONF: str(self.port),
            **ui,
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.session.timeZone": "UTC",
            # Concurrent jobs share the server's executors fairly instead of queueing behind one another.
            "spark.scheduler.mode": "FAIR",
            "spark.sql.shuffle.partitions": "4",
            **self.conf,
        }

    def argv(self, spark_submit: str | None = None) -> list[str]:
        """The ``spark-submit`` command line (holds no catalog and no secret)."""
        binary = spark_submit or str(Path(spark_home()) / "bin" / "spark-submit")
        out = [binary, "--master", self.master, "--class", SERVER_CLASS, "--name", "tablemgmt-connect"]
        out += ["--driver-memory", self.driver_memory]
        # The server's class is loaded from --jars; spark-submit then runs it as an internal application.
        out += ["--jars", ",".join((self.connect_jar, *self.jars))]
        for key, value in self.settings().items():
            out += ["--conf", f"{key}={value}"]
        out.append("spark-internal")
        return out


def server_spec(
    port: int = DEFAULT_PORT, needs: tuple[str, ...] = ("iceberg",), **kwargs: object
) -> ServerSpec:
    """A :class:`ServerSpec` with the jars resolved (downloaded once per host, checksums verified)."""
    from airflow_tablemgmt.spark.launch.artifacts import jar_paths

    connect_jar = jar_paths(["spark-connect"])[0]
    return ServerSpec(connect_jar=connect_jar, jars=tuple(jar_paths(needs)), port=port, **kwargs)  # type: ignore[arg-type]


def wait_for_port(host: str, port: int, timeout: float, process: subprocess.Popen | None = None) -> None:
    """Return once ``host:port`` accepts a TCP connection; raise ``TimeoutError`` (or ``RuntimeError``
    when ``process`` exited first)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(
                f"the Spark Connect server exited with code {process.returncode} before listening"
            )
        try:
            with socket.create_connection((host, port), timeout=1):
                return
        except OSError:
            time.sleep(0.25)
    raise TimeoutError(f"the Spark Connect server did not listen on {host}:{port} within {timeout:.0f}s")


def start_server(spec: ServerSpec, log_path: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start the server in a new process group (stop it with ``os.killpg``), its output to ``log_path``."""
    from airflow_tablemgmt.spark.launch.java import resolve_java_home

    run_env = dict(os.environ if env is None else env)
    run_env.setdefault("JAVA_HOME", str(resolve_java_home()))
    run_env["SPARK_HOME"] = spark_home()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as out:
        return subprocess.Popen(
            spec.argv(), stdout=out, stderr=subprocess.STDOUT, env=run_env, start_new_session=True
        )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main(argv: list[str] | None = None) -> int:
    """``python -m airflow_tablemgmt.spark.connect.server``: resolve the jars, then run the server in the
    foreground (``exec`` of spark-submit: signals reach the JVM). ``make connect``, ``scripts/connect.sh``
    and the compose file's ``spark-connect`` service run this."""
    import argparse
    import logging

    from airflow_tablemgmt.spark.launch.java import resolve_java_home

    parser = argparse.ArgumentParser(prog="airflow_tablemgmt.spark.connect.server", description=main.__doc__)
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0 in a container)")
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--need", action="append", default=[], help="more jars by need (aws, postgresql ...)")
    parser.add_argument("--driver-memory", default="1g")
    parser.add_argument(
        "--ui-port",
        type=int,
        default=4040,
        help="the server's web UI, where each job's cost is read (its REST status API); 0: no UI",
    )
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--print", action="store_true", help="print the command line instead of running it")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    conf = dict(item.split("=", 1) for item in args.conf)
    conf.setdefault("spark.connect.grpc.binding.address", args.host)
    spec = server_spec(
        port=args.port,
        needs=("iceberg", *args.need),
        master=args.master,
        conf=conf,
        driver_memory=args.driver_memory,
        ui_port=args.ui_port or None,
    )
    command = spec.argv()
    if args.print:
        print(" ".join(command))
        return 0
    os.environ.setdefault("JAVA_HOME", str(resolve_java_home()))
    os.environ["SPARK_HOME"] = spark_home()
    print(f"Spark Connect server: sc://{args.host}:{args.port} (master {args.master})", flush=True)
    os.execv(command[0], command)
    return 1  # not reached


if __name__ == "__main__":
    raise SystemExit(main())
