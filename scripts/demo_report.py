"""Print what the demo's maintenance did, read back from the store (not from Spark)."""

from __future__ import annotations

import argparse
import sys

from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook


def _fmt(v: object) -> str:
    if isinstance(v, int) and abs(v) >= 10_000:
        return f"{v:,}"
    return "-" if v is None else str(v)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--table", default="demo.db.events")
    p.add_argument("--actions", nargs="*", default=None)
    args = p.parse_args()
    store = TableMgmtHook().get_store()
    procs = [
        pr
        for pr in store.processes.list(table_id=args.table, limit=200)
        if args.actions is None or pr.action in args.actions
    ]
    if not procs:
        print(f"no processes recorded for {args.table}", file=sys.stderr)
        return 1
    ok = True
    seen: set[str] = set()
    for proc in sorted(procs, key=lambda x: x.id):
        if proc.action in seen:
            continue
        seen.add(proc.action)
        print(
            f"\n{proc.action} on {proc.table_id} — process {proc.id}, attempt {proc.attempt}: {proc.status}"
        )
        if proc.status != ProcessStatus.SUCCESS:
            ok = False
            print(f"  reason: {proc.failure_reason}")
            continue
        s = proc.summary or {}
        before, after = s.get("before") or {}, s.get("after") or {}
        rows = [
            (k, before.get(k), after.get(k))
            for k in ("data_files", "data_bytes", "records", "delete_files", "manifests", "snapshots")
            if k in before or k in after
        ]
        if rows:
            print(f"  {'metric':<14}{'before':>14}{'after':>14}")
            for k, b, a in rows:
                print(f"  {k:<14}{_fmt(b):>14}{_fmt(a):>14}")
        extras = {
            k: v for k, v in s.items() if k not in ("before", "after") and not isinstance(v, dict | list)
        }
        if extras:
            print("  " + ", ".join(f"{k}={_fmt(v)}" for k, v in extras.items()))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
