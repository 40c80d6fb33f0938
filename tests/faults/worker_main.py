"""A maintenance worker as a process of its own, for the kill -9 rounds: `tablemgmt run` with timings
an operator sets (``ProcessRunner``'s lease, heartbeat and staleness) shortened so a lost attempt's
lease lapses in seconds rather than the 2-minute default.

    python tests/faults/worker_main.py STORE_URL TABLE ACTION INSTANT

Prints the run's JSON on stdout. Exit 0 on success, 3 when the table's lease is held (the caller
tries again once it lapses), 2 on any other failure (its reason on stderr).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from datetime import datetime, timedelta

# A scenario may tighten them (``TABLEMGMT_FAULT_LEASE_TTL`` etc., seconds); the rules still hold.
LEASE_TTL = timedelta(seconds=float(os.environ.get("TABLEMGMT_FAULT_LEASE_TTL", "6")))
HEARTBEAT_EVERY = timedelta(seconds=float(os.environ.get("TABLEMGMT_FAULT_HEARTBEAT", "1")))
STALE_AFTER = timedelta(seconds=float(os.environ.get("TABLEMGMT_FAULT_STALE_AFTER", "3")))


def main(argv: list[str]) -> int:
    url, table, action, instant = argv
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
    from airflow_tablemgmt.core.errors import LeaseUnavailable, TableMgmtError
    from airflow_tablemgmt.factories.discovery import default_factories
    from airflow_tablemgmt.hooks.spark_job import SparkJobHook
    from airflow_tablemgmt.lifecycle import ProcessRunner, RunRequest
    from airflow_tablemgmt.store import Store

    connect = os.environ.get("TABLEMGMT_FAULT_CONNECT_URL")  # the job on a Spark Connect server instead
    if connect:
        from airflow_tablemgmt.hooks.spark_connect import SparkConnectJobHook

        hook: object = SparkConnectJobHook(url=connect)
    else:
        hook = SparkJobHook("spark_default")
    if os.environ.get("TABLEMGMT_FAULT_DIE_AFTER_COMMIT") == "1":
        # On Connect the hook itself dies, so the runner still sees a Connect submitter (test_connect_orphan.py)
        hook = _connect_dies_after_commit(connect) if connect else _DiesAfterCommit(hook)
    runner = ProcessRunner(
        Store(url),
        default_factories(),
        hook,  # type: ignore[arg-type]
        lease_ttl=LEASE_TTL,
        heartbeat_every=HEARTBEAT_EVERY,
        stale_after=STALE_AFTER,
    )
    try:
        outcome = runner.run(RunRequest(table, action, datetime.fromisoformat(instant), holder="faults"))
    except LeaseUnavailable as e:
        print(f"error: {e}", file=sys.stderr)
        return 3
    except TableMgmtError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    p = outcome.process
    print(
        json.dumps({"process": p.id, "status": str(p.status), "attempt": p.attempt, "reused": outcome.reused})
    )
    return 0


class _DiesAfterCommit:
    """The worker dies (SIGKILL) the moment its job has committed, before it records anything."""

    def __init__(self, inner: object) -> None:
        self.inner = inner

    def submit(self, job: object, on_started: object = None) -> object:
        import signal

        result = self.inner.submit(job, on_started=on_started)  # type: ignore[attr-defined]
        if getattr(result, "status", None) == "SUCCESS":
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    def kill(self) -> None:
        self.inner.kill()  # type: ignore[attr-defined]

    def confirm_lease(self, sent_monotonic: float, valid_for: float) -> None:
        confirm = getattr(self.inner, "confirm_lease", None)
        if confirm is not None:
            confirm(sent_monotonic, valid_for)


def _connect_dies_after_commit(url: str) -> object:
    """A Connect hook whose worker dies (SIGKILL) the moment its job has committed."""
    import signal

    from airflow_tablemgmt.hooks.spark_connect import SparkConnectJobHook

    class Dies(SparkConnectJobHook):
        def submit(self, job: object, on_started: object = None) -> object:
            result = super().submit(job, on_started=on_started)  # type: ignore[arg-type]
            if getattr(result, "status", None) == "SUCCESS":
                os.kill(os.getpid(), signal.SIGKILL)
            return result

    return Dies(url=url)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
