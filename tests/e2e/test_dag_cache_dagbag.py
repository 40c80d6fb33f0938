"""The shipped DAG file through Airflow's own DagBag, each parse a fresh process as the dag-processor
runs it: DAGs from the cache of built DAGs serialize exactly as freshly built ones, and two processes
writing the cache at once leave one whole file."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import ROOT

pytestmark = pytest.mark.e2e

CHILD = r"""
import hashlib, json, os, sys, time
from airflow.dag_processing.dagbag import DagBag
from airflow.serialization.serialized_objects import DagSerialization
from airflow_tablemgmt.dag_factory import cache as dag_cache
if len(sys.argv) > 2:  # a start line: parse only once every racer has imported Airflow
    open(f"{sys.argv[2]}.{os.getpid()}.ready", "w").close()
    deadline = time.monotonic() + 300
    while not os.path.exists(sys.argv[2]) and time.monotonic() < deadline:
        time.sleep(0.01)
bag = DagBag(dag_folder=sys.argv[1])
ser = {i: DagSerialization.to_dict(d) for i, d in sorted(bag.dags.items())}
s = dag_cache.last_stats
print("RESULT " + json.dumps({
    "ids": sorted(bag.dags), "errors": bag.import_errors,
    "digest": hashlib.sha256(json.dumps(ser, sort_keys=True, default=str).encode()).hexdigest(),
    "hits": s.hits, "built": len(s.built), "wrote": s.wrote, "discarded": s.discarded,
    "package": dag_cache.__file__,
}))
"""

CATALOG = "catalogs: [{name: lake, warehouse: /data/wh}, {name: other, warehouse: /data/other}]\n"


def declarations(n: int) -> str:
    lines = [CATALOG, "tables:\n"]
    for i in range(n):
        catalog = "lake" if i % 2 else "other"
        actions = (
            "{rewrite-files: {}, expire-snapshots: {retries: 2}, compute-stats: {trigger: schedule}}"
            if i % 3
            else "{rewrite-manifests: {interval: '0 4 * * *'}, delete-orphans: {}}"
        )
        lines.append(
            f"  - {{catalog: {catalog}, namespace: s, name: t{i:04d}, owner: o{i % 4}, actions: {actions}}}\n"
        )
    lines += [
        "dynamic-tables:\n",
        "  - {identifier: lake.db.daily, query: SELECT * FROM lake.db.events, freshness: 1 DAY}\n",
        "  - {identifier: lake.db.weekly, query: SELECT * FROM lake.db.daily, freshness: downstream}\n",
        "  - {identifier: lake.db.bad, query: SELECT 1, freshness: 5 HOUR}\n",
    ]
    return "".join(lines)


@pytest.fixture
def folder(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    dags = tmp_path / "dags"
    dags.mkdir()
    shutil.copy(ROOT / "dags" / "tablemgmt_dags.py", dags / "tablemgmt_dags.py")
    # The parses import a copy of the package: the cache is keyed by the code, and a source file
    # edited in the checkout while the test runs would (rightly) discard it between two parses.
    src = tmp_path / "src"
    shutil.copytree(
        ROOT / "airflow_tablemgmt", src / "airflow_tablemgmt", ignore=shutil.ignore_patterns("__pycache__")
    )
    env = {
        **os.environ,
        "TABLEMGMT_STORE_URL": f"sqlite:///{tmp_path / 'store.db'}",
        "AIRFLOW__TABLEMGMT__DAG_CACHE_DIR": str(tmp_path / "cache"),
        "PYTHONPATH": str(src),
    }
    return dags, env


def dagbag(dags: Path, env: dict[str, str]) -> dict:  # type: ignore[type-arg]
    res = subprocess.run(
        [sys.executable, "-c", CHILD, str(dags)], capture_output=True, text=True, env=env, cwd=dags.parent
    )
    line = next((ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line is not None, res.stderr[-3000:]
    out = json.loads(line[len("RESULT ") :])
    out["stderr"] = res.stderr
    assert out["package"].startswith(env["PYTHONPATH"]), out["package"]
    return out  # type: ignore[no-any-return]


def test_dagbag_parses_from_the_cache_what_it_builds(folder: tuple[Path, dict[str, str]]) -> None:
    dags, env = folder
    (dags / "tables.yaml").write_text(declarations(30))
    cold = dagbag(dags, env)
    warm = dagbag(dags, env)
    off = dagbag(dags, {**env, "AIRFLOW__TABLEMGMT__DAG_CACHE_DIR": "off"})
    assert cold["built"] == 32 and cold["hits"] == 0 and cold["wrote"]
    assert warm["built"] == 0 and warm["hits"] == 32 and not warm["wrote"]
    assert off["discarded"] == "off"
    assert warm["ids"] == cold["ids"] == off["ids"] and len(cold["ids"]) == 20 * 3 + 10 * 2 + 2
    # The broken entry is the file's one import error, with the same message from a hit.
    [error] = warm["errors"].values()
    assert "lake.db.bad" in error and warm["errors"] == cold["errors"] == off["errors"]
    assert warm["digest"] == cold["digest"] == off["digest"]


def test_two_parses_writing_the_cache_at_once_leave_one_whole_file(
    folder: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    dags, env = folder
    (dags / "tables.yaml").write_text(declarations(300))
    dagbag(dags, {**env, "AIRFLOW__TABLEMGMT__DAG_CACHE_DIR": "off"})  # sync the file into the store
    cache = tmp_path / "cache"
    # Three rounds on demand (TABLEMGMT_FULL=1); CI races one.
    for round in range(3 if os.environ.get("TABLEMGMT_FULL") == "1" else 1):
        shutil.rmtree(cache, ignore_errors=True)
        # Both parses start from the same line: one must not find the other's finished cache (it would
        # read it, rightly, and the round would race nothing).
        start = tmp_path / f"start-{round}"
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", CHILD, str(dags), str(start)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd=dags.parent,
            )
            for _ in range(2)
        ]
        deadline = time.monotonic() + 300
        while len(list(tmp_path.glob(f"start-{round}.*.ready"))) < 2 and time.monotonic() < deadline:
            assert all(p.poll() is None for p in procs), "a racer ended before the start line"
            time.sleep(0.05)
        start.touch()
        outs = [p.communicate(timeout=600) for p in procs]
        for p, (out, err) in zip(procs, outs, strict=True):
            assert p.returncode == 0, err.decode()[-3000:]
            assert b'"built": 302' in out and b'"wrote": true' in out, out.decode()[-500:]
        after = dagbag(dags, env)
        assert after["hits"] == 302 and after["built"] == 0, (
            round,
            after["discarded"],
            after["stderr"][-2000:],
        )
        assert "WARNING" not in after["stderr"] or "dag_factory.cache" not in after["stderr"]
        assert [p.suffix for p in cache.iterdir()] == [".pickle"], list(cache.iterdir())
