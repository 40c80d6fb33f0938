"""Run the fault-injection suite (tests/faults) at full counts and print its figures as a table.

    .venv/bin/python benchmarks/fault_report.py [--rounds 20] [-k EXPR] [--seed N]

Each scenario's loop runs ``--rounds`` times (``TABLEMGMT_FAULT_ROUNDS``; the concurrent-appender
scenario runs half as many rounds of its six actions). The tests record their figures in a JSON-lines
file (``TABLEMGMT_FAULT_REPORT``); this script prints them as the markdown table the README quotes,
plus pytest's pass/fail line. Needs PostgreSQL at 127.0.0.1:5432 (database ``test``) like the suite.
At 20 rounds on 2 cores expect roughly an hour, most of it the kill -9 rounds (a Spark job and its
recovery each) and the appender rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument(
        "-k", dest="select", default=None, help="pytest -k expression (a subset of scenarios)"
    )
    parser.add_argument("--seed", default=None, help="seed of the kill points (TABLEMGMT_FAULT_SEED)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tms-faults-") as work:
        report = Path(work) / "figures.jsonl"
        env = {
            **os.environ,
            "TABLEMGMT_FAULT_ROUNDS": str(args.rounds),
            "TABLEMGMT_FAULT_REPORT": str(report),
        }
        if args.seed is not None:
            env["TABLEMGMT_FAULT_SEED"] = str(args.seed)
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "faults", "tests/faults"]
        if args.select:
            cmd += ["-k", args.select]
        started = time.monotonic()
        res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.monotonic() - started
        rows = [json.loads(line) for line in report.read_text().splitlines()] if report.exists() else []
    summary = res.stdout.strip().splitlines()[-1] if res.stdout.strip() else res.stderr[-2000:]
    print(f"tests/faults at TABLEMGMT_FAULT_ROUNDS={args.rounds}: {summary} ({wall / 60:.1f} min)\n")
    print(
        "| scenario | rounds | rows lost | rows duplicated | non-terminal | concurrent jobs | late writes applied | wall (s) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['scenario']} | {r['rounds']} | {r['rows_lost']} | {r['rows_duplicated']} | {r['non_terminal']} "
            f"| {r['concurrent_jobs']} | {r['late_writes_applied']} | {r['wall_s']} |"
        )
    noted = [r for r in rows if r.get("notes")]
    if noted:  # a scenario's own counts (cancels refused, settings accepted, outcomes ...)
        print()
        for r in noted:
            print(f"- {r['scenario']}: " + ", ".join(f"{k} {v}" for k, v in r["notes"].items()))
    if res.returncode != 0:
        failed = [line for line in res.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
        print("\n" + "\n".join(failed))
    return res.returncode


if __name__ == "__main__":
    sys.exit(main())
