"""Isolation of the process that runs user SQL (issue 35, Required 2): a dynamic table's job starts
spark-submit in the sandbox (``spark/launch/sandbox.py``, wired by ``hooks/user_sql_sandbox.py``).

* Through the real ``SparkJobHook`` with a probe in place of spark-submit: the refresh job cannot read
  the environment of a sibling process started by the test (a canary variable in it), cannot list the
  DAGs folder or read ``airflow.cfg``, and cannot write into the package; the same probe submitted as a
  maintenance job (not sandboxed) does all of it, which is what the refresh job did before the sandbox.
* One real refresh (``mode: create``, real spark-submit through Airflow's SparkSubmitHook) still succeeds
  inside it, and the files it writes to the local warehouse belong to the worker's own user.
* Fail closed: where the kernel refuses the namespaces the job fails naming the cause and the switch;
  ``[tablemgmt] user_sql_sandbox = off`` runs it unsandboxed.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.hooks.spark_job import SparkJobHook
from airflow_tablemgmt.hooks.spark_submit_direct import SparkConnection
from airflow_tablemgmt.hooks.user_sql_sandbox import PACKAGE_DIR
from airflow_tablemgmt.spark.errors import SandboxUnavailable
from airflow_tablemgmt.spark.launch import sandbox

CANARY = "tms-sibling-canary-6d2e90"

PROBE = r"""#!{python}
import glob, json, os, sys
out = {{}}
def attempt(name, fn):
    try:
        out[name] = fn()
    except Exception as e:
        out[name] = "ERR " + type(e).__name__
def canary_in():
    found = []
    for p in glob.glob("/proc/[0-9]*/environ"):
        try:
            if {canary!r}.encode() in open(p, "rb").read():
                found.append(p)
        except OSError:
            pass
    return found
def plant():
    with open({planted!r}, "w") as f:
        f.write("# planted by the sandbox probe")
    return "written"
attempt("sibling_environ", lambda: {canary!r} in open("/proc/{sibling}/environ", "rb").read().decode(errors="replace"))
attempt("canary_in", canary_in)
attempt("processes", lambda: len(glob.glob("/proc/[0-9]*")))
attempt("dags", lambda: sorted(os.listdir({dags!r})))
attempt("home", lambda: sorted(os.listdir({home!r})))
attempt("airflow_cfg", lambda: open({cfg!r}).read())
attempt("plant", plant)
attempt("uid", os.getuid)
with open({out!r}, "w") as f:
    json.dump(out, f)
sys.exit(1)
"""


@pytest.fixture
def sibling() -> Iterator[subprocess.Popen[bytes]]:
    """A process beside the job (as the scheduler or api-server would be) with a canary in its environment."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"],
        env={**os.environ, "TMS_SIBLING_SECRET": CANARY},
    )
    yield proc
    proc.kill()
    proc.wait()


@pytest.fixture
def airflow_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    home, dags = tmp_path / "airflow", tmp_path / "dags"
    (home / "dags").mkdir(parents=True)
    dags.mkdir()
    (dags / "secret_dag.py").write_text("# a DAG\n")
    (home / "airflow.cfg").write_text(f"[api_auth]\njwt_secret = {CANARY}\n")
    monkeypatch.setenv("AIRFLOW_HOME", str(home))
    monkeypatch.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(dags))
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__JVM_CLASS_CACHE", "false")
    return {"home": home, "dags": dags, "cfg": home / "airflow.cfg"}


def _job(action: str, warehouse: Path, options: dict[str, object] | None = None) -> JobSpec:
    return JobSpec(
        table={"catalog": "lake", "namespace": "db", "name": "sandboxed"},
        catalog={"name": "lake", "warehouse": str(warehouse)},
        action=action,
        options=options or {"mode": "create", "query": "SELECT 1 AS x"},
    )


def _probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, Path], sibling: int, action: str
) -> dict[str, object]:
    out = tmp_path / f"probe-{action}.json"
    planted = PACKAGE_DIR / f"tms_probe_planted_{os.getpid()}.py"
    script = tmp_path / "spark-submit"
    script.write_text(
        PROBE.format(
            python=sys.executable,
            canary=CANARY,
            sibling=sibling,
            dags=str(files["dags"]),
            home=str(files["home"]),
            cfg=str(files["cfg"]),
            planted=str(planted),
            out=str(out),
        )
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    hook = SparkJobHook("spark_default", workdir=str(tmp_path))
    monkeypatch.setattr(
        hook, "_direct_connection", lambda: SparkConnection(master="local[1]", spark_binary=str(script))
    )
    try:
        hook.submit(_job(action, tmp_path / "wh"))
        return json.loads(out.read_text())
    finally:
        planted.unlink(missing_ok=True)


@pytest.mark.skipif(
    sandbox.unavailable() is not None, reason="the kernel does not allow user namespaces here"
)
def test_the_refresh_job_cannot_read_other_processes_the_dags_or_airflows_config(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    airflow_files: dict[str, Path],
    sibling: subprocess.Popen[bytes],
) -> None:
    # The probe's power: unsandboxed (a maintenance job), it reads all of it.
    free = _probe(tmp_path, monkeypatch, airflow_files, sibling.pid, "rewrite-files")
    assert free["sibling_environ"] is True and free["canary_in"], free
    assert free["dags"] == ["secret_dag.py"] and CANARY in str(free["airflow_cfg"]), free
    assert free["plant"] == "written", free

    boxed = _probe(tmp_path, monkeypatch, airflow_files, sibling.pid, "refresh")
    assert boxed["sibling_environ"] == "ERR FileNotFoundError", boxed  # no such process in its /proc
    assert boxed["canary_in"] == [], boxed
    assert isinstance(boxed["processes"], int) and boxed["processes"] < 10, boxed
    assert boxed["dags"] == [] and boxed["home"] == [], boxed
    assert str(boxed["airflow_cfg"]).startswith("ERR"), boxed
    assert boxed["plant"] == "ERR OSError", boxed  # read-only file system
    assert boxed["uid"] == os.getuid(), boxed


def test_without_namespaces_the_job_fails_closed_unless_switched_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_files: dict[str, Path]
) -> None:
    monkeypatch.setitem(sandbox._PROBE, "reason", "unshare failed (Operation not permitted)")  # noqa: SLF001
    hook = SparkJobHook("spark_default", workdir=str(tmp_path))
    script = tmp_path / "spark-submit"
    script.write_text(f"#!{sys.executable}\nimport sys\nsys.exit(1)\n")
    script.chmod(0o700)
    monkeypatch.setattr(
        hook, "_direct_connection", lambda: SparkConnection(master="local[1]", spark_binary=str(script))
    )
    with pytest.raises(SandboxUnavailable, match=r"Operation not permitted.*user_sql_sandbox = off"):
        hook.submit(_job("refresh", tmp_path / "wh"))
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__USER_SQL_SANDBOX", "off")
    result = hook.submit(_job("refresh", tmp_path / "wh"))
    assert result.status == "FAILED" and hook._hook.command_prefix == []  # noqa: SLF001 - ran, unsandboxed


@pytest.mark.integration
@pytest.mark.skipif(
    sandbox.unavailable() is not None, reason="the kernel does not allow user namespaces here"
)
def test_a_real_refresh_succeeds_inside_the_sandbox(
    tmp_path: Path, airflow_files: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    warehouse = tmp_path / "wh"
    hook = SparkJobHook("spark_default", workdir=str(tmp_path / "jobs"))
    (tmp_path / "jobs").mkdir()
    query = "SELECT id, concat('v', CAST(id AS STRING)) AS v FROM range(5)"
    with caplog.at_level(logging.INFO):
        result = hook.submit(_job("refresh", warehouse, {"mode": "create", "query": query}))
    assert result.ok, result.error
    assert result.summary["rows_written"] == 5, result.summary
    assert Path(hook._hook.command_prefix[0]).name == "unshare", hook._hook.command_prefix  # noqa: SLF001
    written = [p for p in warehouse.rglob("*") if p.is_file()]
    assert written and {p.stat().st_uid for p in written} == {os.getuid()}


def test_only_dynamic_table_jobs_are_wrapped_with_airflows_paths_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, airflow_files: dict[str, Path]
) -> None:
    from airflow_tablemgmt.hooks.user_sql_sandbox import sandbox_prefix
    from airflow_tablemgmt.spark.launch.submit import build_submit_spec

    monkeypatch.setitem(sandbox._PROBE, "reason", None)  # noqa: SLF001 - the wiring, whatever the kernel
    warehouse = airflow_files["home"] / "warehouse"  # a local warehouse inside AIRFLOW_HOME stays reachable
    warehouse.mkdir()
    spec_path = tmp_path / "job.json"
    refresh = _job("refresh", warehouse)
    prefix = sandbox_prefix(refresh, spec_path, build_submit_spec(refresh, spec_path))
    pairs = set(zip(prefix, prefix[1:], strict=False))
    assert Path(prefix[0]).name == "unshare" and prefix[-1] == "--"
    assert {("--hide", str(airflow_files["home"])), ("--hide", str(airflow_files["dags"]))} <= pairs
    assert {("--read-only", os.path.realpath(sys.prefix)), ("--read-only", str(PACKAGE_DIR))} <= pairs
    assert ("--keep", str(warehouse)) in pairs
    maintenance = _job("rewrite-files", warehouse)
    assert sandbox_prefix(maintenance, spec_path, build_submit_spec(maintenance, spec_path)) == []


@pytest.mark.skipif(
    sandbox.unavailable() is not None, reason="the kernel does not allow user namespaces here"
)
def test_a_kept_path_inside_a_hidden_one_is_mounted_back(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "keep").mkdir(parents=True)
    (home / "secret").write_text(CANARY)
    (home / "keep" / "spec").write_text("the job's own file")
    argv = sandbox.Sandbox(hide=(str(home),), keep=(str(home / "keep"),)).wrap(
        ["sh", "-c", f"ls -A {home}; cat {home}/keep/spec; echo written > {home}/keep/out"]
    )
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stdout.split("\n")
    assert out[:2] == ["keep", "the job's own file"], out
    assert (home / "keep" / "out").read_text() == "written\n"
    assert CANARY not in "".join(out)
