"""Print what the demo's maintenance did, read back from the store (not from Spark).

Two row counts per action: ``live_records`` (what ``SELECT count(*)`` returns) and
``physical_rows`` (rows stored in data files, deleted rows included until a rewrite applies the
deletes). Only expire-data may change live records, and only when it is not a dry run; the report
checks that and exits non-zero if any other process changed them.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

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


def _is_id(key: str) -> bool:
    """Ids (snapshot ids, process ids) are names, not quantities: printed without separators."""
    return key == "id" or key.endswith(("_id", "_ids", "-id"))


def _fmt(v: object, key: str = "") -> str:
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 10_000 and not _is_id(key):
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
            print(f"  {k:<15}{_fmt(b, k):>14}{_fmt(a, k):>14}")
    extras = {k: v for k, v in s.items() if k not in ("before", "after") and not isinstance(v, dict | list)}
    if extras:
        print("  " + ", ".join(f"{k}={_fmt(v, k)}" for k, v in extras.items()))


UI_PASSWORDS_FILE = "ui-passwords.json"  # under the demo's AIRFLOW_HOME; read by scripts/ui.sh
UI_USER = "admin"
UI_USERS = ("admin", "viewer")  # `make ui`'s simple auth manager: one admin, one viewer (read-only)


def ui_password(home: Path, user: str = UI_USER) -> str:
    """The password of a UI user (simple auth manager), made once per demo home and kept in
    ``<home>/ui-passwords.json`` (the manager's passwords file), so `make ui` and the curl calls agree.
    A home made before the viewer existed gets the viewer's password added, the admin's kept."""
    path = home / UI_PASSWORDS_FILE
    passwords = json.loads(path.read_text()) if path.exists() else {}
    if any(u not in passwords for u in UI_USERS):
        for u in UI_USERS:
            passwords.setdefault(u, secrets.token_urlsafe(12))
        path.write_text(json.dumps(passwords))
        path.chmod(0o600)
    return str(passwords[user])


def next_steps(
    *, home: Path, table: str, process_ids: Sequence[int], port: int = 8080, dynamic: str | None = None
) -> str:
    """What to do after the demo, as shell lines a new user can paste: the environment that reaches
    the demo's store and Airflow, the UI (``make ui``), and the REST calls behind the numbers above."""
    home = home.resolve()
    base = f"http://127.0.0.1:{port}"
    venv_bin = Path(sys.executable).parent
    password = ui_password(home)
    auth = '-H "Authorization: Bearer $TOKEN"'
    api = f"{base}/tablemgmt/v1"
    login = json.dumps({"username": UI_USER, "password": password})
    root = Path(__file__).resolve().parents[1]
    make_ui = f"make -C {root} ui"
    if home != root / ".demo" / "airflow":  # scripts/ui.sh finds the home as $DEMO_DIR/airflow
        make_ui = f"DEMO_DIR={home.parent} {make_ui}"
    if port != 8080:
        make_ui = f"UI_PORT={port} {make_ui}"
    lines = [
        "In a new shell, reach the demo's store and Airflow (without these, `tablemgmt` and `airflow`",
        "open ~/airflow, which holds no tables):",
        f"  export AIRFLOW_HOME={home}",
        f"  export TABLEMGMT_STORE_URL=sqlite:///{home / 'tablemgmt.db'}",
        "  export AIRFLOW__CORE__LOAD_EXAMPLES=False",
        f"  export PATH={venv_bin}:$PATH",
        "  tablemgmt tables",
        f"  tablemgmt processes --table {table}",
        "",
        "See the DAGs and the Table maintenance page in Airflow's UI:",
        f"  {make_ui}",
        "  (starts api-server, scheduler, dag-processor and triggerer on this home; Ctrl-C stops them)",
        f"  open {base}/plugin/tablemgmt   (log in as {UI_USER} / {password})",
        "  Snapshot-driven actions (trigger: event, the default) wait in the triggerer that `make ui` starts.",
        "",
        "The numbers above from the REST API (while `make ui` runs):",
        f"  TOKEN=$(curl -s -X POST {base}/auth/token -H 'Content-Type: application/json' \\",
        f"    -d '{login}' | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"access_token\"])')",
        f"  curl -s {auth} {api}/tables/{table}",
        f"  curl -s {auth} {api}/tables/{table}/health",
        f"  curl -s {auth} '{api}/processes?table={table}'",
        *(f"  curl -s {auth} {api}/processes/{pid}" for pid in process_ids),
    ]
    if dynamic:
        # A schedule time inside the accepted window (the refresh DAG's start .. now + 5 min): today, 00:00 UTC.
        today = datetime.now(UTC).strftime("%Y-%m-%d 00:00:00")
        refresh = json.dumps({"isPeriodic": True, "scheduleTime": today})
        lines += [
            "",
            f"The dynamic table {dynamic}: its definition, state and refresh history, and FLIP-435's refresh",
            "(it answers once the refresh is submitted; the scheduler `make ui` starts runs it):",
            f"  tablemgmt dt show {dynamic}",
            f"  tablemgmt dt history {dynamic}",
            f"  curl -s {auth} {api}/dynamic-tables/{dynamic}/history",
            f"  curl -s -X POST {auth} -H 'Content-Type: application/json' \\",
            f"    {api}/dynamic-tables/{dynamic}/refresh -d '{refresh}'",
        ]
    return "\n".join(lines)


def main() -> int:
    from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook

    p = argparse.ArgumentParser()
    p.add_argument("--table", default="demo.db.events")
    p.add_argument("--actions", nargs="*", default=None)
    p.add_argument("--next-steps", action="store_true", help="print what to do after the demo, and exit")
    p.add_argument(
        "--ui-password",
        nargs="?",
        const=UI_USER,
        choices=UI_USERS,
        default=None,
        help="print a UI user's password (admin by default), and exit",
    )
    p.add_argument("--port", type=int, default=int(os.environ.get("UI_PORT", "8080")))
    p.add_argument("--dynamic", default=None, help="the demo's dynamic table, for the next steps")
    args = p.parse_args()
    home = Path(os.environ.get("AIRFLOW_HOME") or Path.home() / "airflow")
    if args.ui_password:
        print(ui_password(home, args.ui_password))
        return 0
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
    if args.next_steps:
        ids = [pr.id for pr in procs]
        print(next_steps(home=home, table=args.table, process_ids=ids, port=args.port, dynamic=args.dynamic))
        return 0
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
