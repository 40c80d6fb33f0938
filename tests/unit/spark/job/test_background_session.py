"""The job's background session: pyspark is imported on the caller's thread before the session's thread
starts, so that thread's first act is the JVM's part of the start (imported on the thread, pyspark's import
shared the interpreter with the job's own imports and early read, and the JVM began ≈ 0.4 s later); what
building the session raises comes back on the waiting thread. No JVM: the build is a stand-in, in a fresh
interpreter that has not imported pyspark yet."""

from __future__ import annotations

import json
import subprocess
import sys

_PROBE = """
import json, sys, threading
from airflow_tablemgmt.spark.job import session

seen = {}

def build(catalog, name):
    seen["pyspark.sql imported when the thread started"] = "pyspark.sql" in sys.modules
    seen["thread"] = threading.current_thread().name
    if name == "boom":
        raise RuntimeError("no JVM")
    return "the session"

session.build_session = build
seen["pyspark.sql imported before start"] = "pyspark.sql" in sys.modules
background = session.BackgroundSession()
background.start(None, sys.argv[1])
seen["pyspark.sql imported when start returned"] = "pyspark.sql" in sys.modules
seen["joined"] = background.join()
try:
    background.wait() if sys.argv[1] == "boom" else None
except RuntimeError as e:
    seen["raised"] = str(e)
print(json.dumps(seen))
"""


def _probe(name: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, name], capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_pyspark_is_imported_on_the_callers_thread_before_the_session_thread_starts() -> None:
    seen = _probe("job")

    assert seen["pyspark.sql imported before start"] is False
    assert seen["pyspark.sql imported when start returned"] is True
    assert seen["pyspark.sql imported when the thread started"] is True
    assert seen["thread"] == "tablemgmt-session"
    assert seen["joined"] == "the session"


def test_what_the_build_raises_is_raised_by_wait() -> None:
    seen = _probe("boom")

    assert seen["joined"] is None
    assert seen["raised"] == "no JVM"
