"""Print what the demo's maintenance did, read back from the store (not from Spark).

Two row counts per action: ``live_records`` (what ``SELECT count(*)`` returns) and
``physical_rows`` (rows stored in data files, deleted rows included until a rewrite applies the
deletes). Only expire-data may change live records, and only when it is not a dry run; the report
checks that and exits non-zero if any other process changed them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable

from airflow_tablemgmt.core.process import Process, ProcessStatus

METRICS = (
    "data_files",
    "data_bytes",
    "live_records",
    "physical_rows",
    "delete_files",
    "manifests",
    "snapshots",
)
TTL_ACTIONS = frozenset({"expire-data"})


def _fmt(v: object) -> str:
    if isinstance(v, int) and abs(v) >= 10_000:
        return f"{v:,}"
    return "-" if v is None else str(v)


def deletes_rows(proc: Process) -> bool:
    """Whether this process may change live records: a TTL action that was not a dry run."""
    summary = proc.summary or {}
    return proc.action in TTL_ACTIONS and not summary.get("dry_run", False)


def live_records_changes(procs: Iterable[Process]) -> tuple[int, list[str]]:
    """``(processes checked, one line per process that changed live records but must not)``."""
    checked, bad = 0, []
    for proc in procs:
        if proc.status != ProcessStatus.SUCCESS or deletes_rows(proc):
            continue
        s = proc.summary or {}
        before, after = (
            (s.get("before") or {}).get("live_records"),
            (s.get("after") or {}).get("live_records"),
        )
        if before is None and after is None:
            continue  # skipped run: nothing measured
        checked += 1
        if before != after:
            bad.append(
                f"{proc.action} (process {proc.id}) changed live records: {_fmt(before)} -> {_fmt(after)}"
            )
    return checked, bad


def print_process(proc: Process) -> None:
    print(f"\n{proc.action} on {proc.table_id} — process {proc.id}, attempt {proc.attempt}: {proc.status}")
    if proc.status != ProcessStatus.SUCCESS:
        print(f"  reason: {proc.failure_reason}")
        return
    s = proc.summary or {}
    if s.get("dry_run"):
        print(f"  DRY RUN, nothing deleted: {s.get('dry_run_reason')}")
    before, after = s.get("before") or {}, s.get("after") or {}
    rows = [(k, before.get(k), after.get(k)) for k in METRICS if k in before or k in after]
    if rows:
        print(f"  {'metric':<15}{'before':>14}{'after':>14}")
        for k, b, a in rows:
            print(f"  {k:<15}{_fmt(b):>14}{_fmt(a):>14}")
    extras = {k: v for k, v in s.items() if k not in ("before", "after") and not isinstance(v, dict | list)}
    if extras:
        print("  " + ", ".join(f"{k}={_fmt(v)}" for k, v in extras.items()))


def main() -> int:
    from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook

    p = argparse.ArgumentParser()
    p.add_argument("--table", default="demo.db.events")
    p.add_argument("--actions", nargs="*", default=None)
    args = p.parse_args()
    store = TableMgmtHook().get_store()
    procs = sorted(
        (
            pr
            for pr in store.processes.list(table_id=args.table, limit=200)
            if args.actions is None or pr.action in args.actions
        ),
        key=lambda x: x.id,
    )
    if not procs:
        print(f"no processes recorded for {args.table}", file=sys.stderr)
        return 1
    for proc in procs:
        print_process(proc)
    failed = [pr for pr in procs if pr.status != ProcessStatus.SUCCESS]
    checked, changed = live_records_changes(procs)
    print()
    if changed:
        for line in changed:
            print(f"ERROR: {line}; only expire-data (not a dry run) may change live records")
    else:
        print(
            f"live records unchanged by every non-TTL action ({checked} processes checked); "
            "physical rows drop when a rewrite applies delete files"
        )
    return 1 if failed or changed else 0


if __name__ == "__main__":
    sys.exit(main())
