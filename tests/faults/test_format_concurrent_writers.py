"""A concurrent writer during each mutating Delta and Hudi action: 0 committed rows lost (issue 27).

The Iceberg counterpart is ``test_concurrent_appender.py`` (a writer thread in the action's JVM); here the
writer is a second **process** with its own JVM, as a production ingestion job is. One child
(``format_concurrent_scenario.py actions``) writes the table, then runs every mutating action's job, made by
the format's factory and run through the job's entry; the other (``... writer``) appends batches of new ids
the whole time and records each batch whose commit returned. Afterwards every committed id must be in the
table exactly once, beside the base rows; an action that failed (a conflict) is retried once and counted.

Hudi needs optimistic concurrency control with a lock both processes share: the writer's settings and the
maintenance job's come from the same ``hudi-defaults.conf`` (``HUDI_CONF_DIR``), with Hudi's
``FileSystemBasedLockProvider`` (a lock file under the table, which works across processes on one file
system; ``InProcessLockProvider`` serialises one JVM only). Delta needs nothing: its log commits are
optimistic, and VACUUM keeps files younger than the table's retention (the writer's uncommitted files).

Hudi's clustering: ``hudi-clustering`` runs the job's clustering alone, ``TABLEMGMT_CLUSTERING_ROUNDS`` times
(default 4), each once the writer committed again; ``hudi-call-clustering`` calls Hudi's ``run_clustering``
directly (no job code, Hudi's default conflict strategy), the loss the job's clustering prevents (an expected
failure). A clustering that lost to the writer fails with its plan rolled back: no plan may be left pending.
``TABLEMGMT_HUDI_INFO_LOGS=1`` logs Hudi's locks, conflict checks and scheduling in the children's logs.

On demand (``TABLEMGMT_FORMATS_FULL=1``): two JVMs at once per format, several minutes each on 2 cores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.faults.conftest import Figures
from tests.integration.formats.format_jobs import STEP

pytestmark = [
    pytest.mark.faults,
    pytest.mark.skipif(
        os.environ.get("TABLEMGMT_FORMATS_FULL") != "1",
        reason="the format concurrent-writer scenarios run with TABLEMGMT_FORMATS_FULL=1",
    ),
]
ROOT = Path(__file__).resolve().parents[2]
SCENARIO = "tests.faults.format_concurrent_scenario"
HUDI_OCC = """\
hoodie.write.concurrency.mode=optimistic_concurrency_control
hoodie.write.lock.provider=org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider
hoodie.cleaner.policy.failed.writes=LAZY
hoodie.write.lock.filesystem.expire=5
"""


def committed_ids(signals: Path) -> tuple[set[int], list[dict[str, Any]]]:
    batches = [json.loads(line) for line in (signals / "committed.jsonl").read_text().splitlines()]
    return {i for b in batches for i in range(b["first"], b["first"] + b["count"])}, batches


def failed_ids(signals: Path) -> tuple[set[int], list[dict[str, Any]]]:
    """The ids of the writer's refused batches, and the batches (with when each write began and ended)."""
    path = signals / "failed.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return {i for r in rows for i in range(r["first"], r["first"] + r["count"])}, rows


def delta_ids(location: Path) -> list[int]:
    """The ids of the table's live files, from ``_delta_log`` and the Parquet files (no Spark)."""
    import pyarrow.parquet as pq

    from airflow_tablemgmt.formats.delta.metadata import read_delta

    ids: list[int] = []
    for rel in read_delta(str(location)).files:
        ids += pq.read_table(location / rel, columns=["id"]).column("id").to_pylist()
    return ids


def run_pair(variant: str, tmp_path: Path) -> tuple[dict[str, dict[str, Any]], Path]:
    from tests.faults.format_concurrent_scenario import VARIANTS, location

    fmt = VARIANTS[variant][0]
    warehouse, signals, conf = tmp_path / "wh", tmp_path / "signals", tmp_path / "hudi-conf"
    for d in (warehouse, signals, conf):
        d.mkdir()
    env = dict(os.environ)
    if fmt == "hudi":
        (conf / "hudi-defaults.conf").write_text(HUDI_OCC)
        env["HUDI_CONF_DIR"] = str(conf)
    cmd = [sys.executable, "-m", SCENARIO, variant]
    logs = {role: (tmp_path / f"{role}.log").open("w") for role in ("writer", "actions")}
    writer = subprocess.Popen(
        [*cmd, "writer", str(warehouse), str(signals)],
        cwd=ROOT,
        env=env,
        stdout=logs["writer"],
        stderr=subprocess.STDOUT,
    )
    try:
        acts = subprocess.run(
            [*cmd, "actions", str(warehouse), str(signals)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=logs["actions"],
            text=True,
            timeout=2400,
        )
        writer.wait(timeout=600)
    finally:
        if writer.poll() is None:
            writer.kill()
        for f in logs.values():
            f.close()
    assert acts.returncode == 0, (tmp_path / "actions.log").read_text()[-6000:]
    assert writer.returncode == 0, (tmp_path / "writer.log").read_text()[-6000:]
    steps = {}
    for line in acts.stdout.splitlines():
        if line.startswith(STEP):
            data = json.loads(line[len(STEP) :])
            steps[data.pop("step")] = data
    return steps, location(warehouse, fmt)


# Hudi's own procedure with its default conflict strategy, no job code: a writer's batch committed into a file
# group of an executing clustering is lost (docs/formats.md, Faults). Kept to show the loss is Hudi's and what the
# job's clustering (PreferWriterConflictResolutionStrategy, a failed plan rolled back) prevents.
HUDI_OWN_CLUSTERING_LOSS = pytest.mark.xfail(
    strict=False,
    reason="Hudi 1.0.2 run_clustering with the default conflict strategy loses a concurrent writer's batch",
)


def pending_clusterings(where: Path) -> set[str]:
    """Clustering instants on the timeline with no completed replacecommit (a plan left behind)."""
    names = [p.name for p in (where / ".hoodie" / "timeline").iterdir()]
    planned = {n.split(".")[0] for n in names if n.endswith(".clustering.requested")}
    return planned - {n.split("_")[0] for n in names if n.endswith(".replacecommit") and "_" in n}


@pytest.mark.timeout(3600)
@pytest.mark.parametrize(
    "variant",
    [
        "delta",
        "hudi-no-clustering",
        "hudi",
        "hudi-clustering",
        pytest.param("hudi-call-clustering", marks=HUDI_OWN_CLUSTERING_LOSS),
    ],
)
def test_no_committed_row_is_lost_while_a_second_process_writes(
    variant: str, tmp_path: Path, figures: Figures
) -> None:
    from tests.faults.format_concurrent_scenario import BASE, VARIANTS

    fmt, todo = VARIANTS[variant]
    steps, where = run_pair(variant, tmp_path)
    (tmp_path / "steps.json").write_text(json.dumps({k: v for k, v in steps.items() if k != "read"}))
    signals = tmp_path / "signals"
    committed, batches = committed_ids(signals)
    refused, refusals = failed_ids(signals)
    errors = [r["error"] for r in refusals]
    ids = delta_ids(where) if fmt == "delta" else steps["read"]["ids"]
    expected = set(range(BASE)) | committed
    lost = expected - set(ids)
    unknown = set(ids) - expected - refused
    figures.rows_lost = len(lost)
    figures.rows_duplicated = len(ids) - len(set(ids))
    figures.rounds = 1
    outcomes: dict[str, Any] = {}
    for action, _ in todo:
        s = steps[action]
        outcomes[action] = {
            "attempts": [a["outcome"] for a in s["attempts"]],
            "conflicts": [a["reason"] for a in s["attempts"] if a["outcome"] == "failed"],
            # commits that returned while the action ran; writes open (begun, not yet ended: committed or
            # refused by the format, a conflict the writer lost is a write that met the action too) while it ran
            "commits_during": sum(1 for b in batches if s["started"] < b["at"] < s["ended"]),
            "writes_open_during": sum(
                1 for b in batches + refusals if b["started"] < s["ended"] and b["at"] > s["started"]
            ),
            "seconds": round(s["ended"] - s["started"], 1),
        }
    figures.notes = {
        "committed_batches": len(batches),
        "refused_batches": len(errors),
        "refused_reasons": sorted({e[:160] for e in errors})[:3],
        "refused_rows_present": len(set(ids) & refused),
        "actions": outcomes,
    }
    print(json.dumps(figures.notes, indent=1))
    assert not lost, f"{len(lost)} committed rows lost, e.g. {sorted(lost)[:10]}"
    assert len(ids) == len(set(ids)), f"{figures.rows_duplicated} rows duplicated"
    assert not unknown, f"rows nobody wrote: {sorted(unknown)[:10]}"
    for action, o in outcomes.items():
        if action.startswith("clustering") and o["attempts"][-1] == "failed":
            # the job's clustering lost to the writer (PreferWriter) and rolled its plan back: safe, retried later
            assert all(
                "plan was rolled back and deleted (" in c and "(not:" not in c for c in o["conflicts"]
            ), o
        elif not action.startswith("call-"):
            assert o["attempts"][-1] in ("succeeded", "skipped"), f"{action}: {o}"
    if fmt == "hudi" and not variant.startswith("hudi-call"):
        assert not pending_clusterings(where), "a clustering plan was left pending"
    # a write of the writer was open while an action ran, and some committed meanwhile (else this proved little):
    # every action of a single pass, at least one round of a repeated one
    repeated = any("-" in a for a, _ in todo)
    opens = [o["writes_open_during"] >= 1 for o in outcomes.values()]
    assert any(opens) if repeated else all(opens), outcomes
    assert sum(o["commits_during"] for o in outcomes.values()) >= 1, outcomes
