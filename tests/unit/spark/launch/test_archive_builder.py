"""The class archive's own run (``spark/launch/archive_builder.py``), with a stand-in ``spark-submit`` that does
what the JVM does at exit when told ``-XX:ArchiveClassesAtExit=<temp>``; and the hook: a job that finds no
archive runs without the option and asks for this run only after it succeeded."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_tablemgmt.spark.launch import archive_builder
from airflow_tablemgmt.spark.launch.java import resolve_java_home

FAKE_SUBMIT = """#!{python}
import json, pathlib, re, sys
args = sys.argv[1:]
pathlib.Path({calls!r}).open("a").write(json.dumps(args) + "\\n")
assert args[-2].endswith("warm_up.py") and pathlib.Path(args[-1]).is_dir(), args
opts = " ".join(a for a in args if a.startswith("spark.driver.extraJavaOptions="))
m = re.search(r"-XX:ArchiveClassesAtExit=(\\S+)", opts)
if m and {succeed}:
    pathlib.Path(m.group(1)).write_bytes((0xF00BABA8).to_bytes(4, "little") + b"\\0" * 4092)
sys.exit(0 if {succeed} else 1)
"""


def _spark_home(tmp_path: Path, succeed: bool = True) -> tuple[Path, Path]:
    home, calls = tmp_path / f"spark-{succeed}", tmp_path / f"calls-{succeed}.jsonl"
    (home / "bin").mkdir(parents=True)
    (home / "jars").mkdir()
    submit = home / "bin" / "spark-submit"
    submit.write_text(FAKE_SUBMIT.format(python=sys.executable, calls=str(calls), succeed=succeed))
    submit.chmod(0o755)
    return home, calls


def _request(directory: Path, home: Path, tmp_path: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "build-1-0.json"
    env = {
        "JAVA_HOME": resolve_java_home(),
        "SPARK_HOME": str(home),
        "SPARK_CONF_DIR": str(tmp_path / "no-conf"),
    }
    path.write_text(
        json.dumps({"conf": {"spark.driver.memory": "1g"}, "jars": [], "packages": None, "env": env})
    )
    return path


def test_a_build_writes_the_archive_once_and_leaves_no_request_lock_or_temp(tmp_path: Path) -> None:
    directory = tmp_path / "jvm"
    home, calls = _spark_home(tmp_path)

    assert archive_builder.build(_request(directory, home, tmp_path)) == 0

    (archive,) = directory.glob("driver-*.jsa")
    assert archive.name.endswith("-4096.jsa")
    assert sorted(p.name for p in directory.iterdir()) == [archive.name]
    assert not archive_builder.building(directory)
    # Asked again (a second job before the first build ended): nothing to do, no spark-submit.
    assert archive_builder.build(_request(directory, home, tmp_path)) == 0
    assert len(calls.read_text().splitlines()) == 1


def test_a_failed_build_keeps_nothing(tmp_path: Path) -> None:
    directory = tmp_path / "jvm"
    home, _ = _spark_home(tmp_path, succeed=False)

    assert archive_builder.build(_request(directory, home, tmp_path)) == 1

    assert list(directory.iterdir()) == []  # a later job asks again


RESULT = (
    '{"tms_result": 1, "status": "SUCCESS", "action": "rewrite-files", "table": "lake.db.t", "summary": {}}'
)


def test_the_hook_runs_the_job_without_the_dump_and_asks_for_the_build_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_tablemgmt.core.factory import JobSpec
    from airflow_tablemgmt.hooks.spark_job import SparkJobHook
    from airflow_tablemgmt.hooks.spark_submit_direct import SparkConnection

    argv_file = tmp_path / "argv.json"
    binary = tmp_path / "spark-submit"
    binary.write_text(
        f"#!{sys.executable}\nimport json, sys\njson.dump(sys.argv[1:], open({str(argv_file)!r}, 'w'))\n"
        f"print({RESULT!r})\n"
    )
    binary.chmod(0o755)
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__JVM_CLASS_CACHE_DIR", str(tmp_path / "jvm"))
    requested: list[dict[str, Any]] = []
    monkeypatch.setattr(archive_builder, "request", lambda **kw: requested.append(kw) or 4242)
    hook = SparkJobHook("spark_default", workdir=str(tmp_path))
    monkeypatch.setattr(
        hook, "_direct_connection", lambda: SparkConnection(master="local[1]", spark_binary=str(binary))
    )
    hook.extra_conf["spark.openlineage.parentRunId"] = "run-1"
    job = JobSpec(
        table={"catalog": "lake", "namespace": "db", "name": "t"},
        catalog={"name": "lake", "type": "hadoop", "warehouse": str(tmp_path / "wh"), "properties": {}},
        action="rewrite-files",
        process_id=7,
    )

    result = hook.submit(job)

    assert result.ok, result.error
    argv = json.loads(argv_file.read_text())
    assert not [a for a in argv if "ArchiveClassesAtExit" in a or "SharedArchiveFile" in a], argv
    (asked,) = requested
    assert asked["directory"] == tmp_path / "jvm"
    assert "spark.openlineage.parentRunId" not in asked["conf"]  # the job's own settings only
    assert asked["conf"]["spark.driver.memory"]
    assert not list((tmp_path / "jvm").glob("driver-*.lock"))  # the job held no creation lock
