"""What a Spark job that wrote no result line is said to have failed of, in fixed words only."""

from __future__ import annotations

import re
from pathlib import Path

#: What a failure without a result line is said to be, from fixed words only: (pattern in Spark's
#: output, what the reason says). The output itself -- driver and executor exception text, which can
#: carry a query's values, the environment, a file's contents -- never becomes the reason.
_SIGNS = (
    (re.compile(r"OutOfMemoryError|Cannot allocate memory"), "the JVM ran out of memory"),
    (
        re.compile(r"ClassNotFoundException|NoClassDefFoundError"),
        "a class was not found (Spark packages or jars)",
    ),
    (re.compile(r"Connection refused|UnknownHostException|ConnectException"), "a connection failed"),
    (re.compile(r"AccessDenied|Permission denied|403 Forbidden"), "access was denied"),
    (re.compile(r"FileNotFoundException|No such file"), "a file was not found"),
)


def failure_reason(lines: list[str], exit_error: str | None) -> str:
    """The reason a job that wrote no result line failed, sanitized: spark-submit's exit code and, in
    fixed words, the kind of failure Spark's output shows (:data:`_SIGNS`). The reason is stored on
    the process row, which every viewer reads; Spark's own text is only in the task log, where each
    line went as it came."""
    text = "\n".join(lines)
    kinds = [said for pattern, said in _SIGNS if pattern.search(text)]
    code = re.search(r"Error code is: (-?\d+)", exit_error or "")
    if code:
        ended = f"spark-submit exited with code {code.group(1)}"
        if code.group(1) in ("137", "-9"):
            kinds.append("it was killed (SIGKILL)")
    elif exit_error:
        ended = "spark-submit failed"
    else:
        ended = "spark-submit exited"
    found = f": {'; '.join(kinds)}" if kinds else ""
    return (
        f"the Spark job failed without a result ({ended}){found}; Spark's output is in the log of the task "
        "that ran this process and is not stored here"
    )


def guard_stop_reason(spec_path: Path) -> str | None:
    """Why the driver's lease guard stopped the job, when it did: the line it wrote beside the job's lease
    confirmation (``spark/job/lease_guard.py``'s ``STOP_FILE``) before it killed the JVM, whose output
    ends with it. Fixed words and the guard's own figures only."""
    from airflow_tablemgmt.spark.job.lease_guard import STOP_FILE

    try:
        text = (spec_path.with_name(STOP_FILE)).read_text().strip()
    except OSError:
        return None
    return text[:500] or None
