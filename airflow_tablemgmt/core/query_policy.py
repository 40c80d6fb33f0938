"""What a dynamic table's user SQL may ask of the session it runs in (DESIGN: *User SQL is user code*).

The query itself is checked on Spark's analysed plan inside the refresh job (``spark.query_policy``);
this module holds the pure rules both sides share:

* the session settings a refresh forces whatever the request says (``FORCED_SESSION``: Spark's SQL on
  files is off, so ``SELECT * FROM text.`/etc/passwd``` has no file source to resolve to);
* which ``spark.sql.*`` dynamic options a refresh request may set. A key that could widen what the
  query reaches — a new catalog (``spark.sql.catalog.<name>`` loads any class with any options), SQL
  on files, the default catalog, legacy analysis rules, Hive, log redaction — is refused, naming the
  key, when the request is made (REST, CLI) and again inside the job.
"""

from __future__ import annotations

SESSION_PREFIX = "spark.sql."
FORCED_SESSION: dict[str, str] = {"spark.sql.runSQLOnFiles": "false"}
# Lower-cased: Spark's SQL configuration keys are matched case-sensitively, but a refusal must not
# depend on the spelling.
DENIED_SESSION_PREFIXES: tuple[str, ...] = (
    "spark.sql.catalog.",
    "spark.sql.catalogimplementation",
    "spark.sql.defaultcatalog",
    "spark.sql.runsqlonfiles",
    "spark.sql.legacy.",
    "spark.sql.hive.",
    "spark.sql.redaction.",
    "spark.sql.extensions",
    "spark.sql.warehouse.dir",
    "spark.sql.queryexecutionlisteners",
    "spark.sql.streaming.",
)


def session_option_refusal(key: str, field: str = "dynamicOptions") -> str | None:
    """Why the dynamic option ``key`` may not be set on a refresh's session, or None when it may.

    Keys outside ``spark.sql.`` are Iceberg write options and are not session settings at all."""
    lowered = key.strip().lower()
    if not lowered.startswith(SESSION_PREFIX):
        return None
    for prefix in DENIED_SESSION_PREFIXES:
        if lowered.startswith(prefix):
            return (
                f"{field}.{key}: a refresh may not set {prefix.rstrip('.')}* (it would let the query reach "
                "more than the tables of registered catalogs); allowed: other spark.sql.* settings such as "
                "spark.sql.shuffle.partitions, and Iceberg write options such as write-format"
            )
    return None
