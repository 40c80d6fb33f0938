"""The ``[tablemgmt]`` section of Airflow's configuration: every option the package reads.

Declared to Airflow through provider info (``config``), so ``airflow config list --section tablemgmt``
and ``airflow providers configs`` show each one with its default, and ``conf.get("tablemgmt", ...)``
returns the default below when nothing sets it. Each default means what the code does when the option
is unset; ``tests/unit/test_provider_info.py`` checks that every option read in the package is declared
here and that the defaults agree with the code's. Kept free of imports: Airflow reads provider info in
every process.
"""

from __future__ import annotations

from typing import Any

VERSION_ADDED = "0.1.0"


def _option(kind: str, default: str | None, description: str, example: str | None) -> dict[str, Any]:
    return {
        "description": description,
        "version_added": VERSION_ADDED,
        "type": kind,
        "example": example,
        "default": default,
    }


OPTIONS: dict[str, dict[str, Any]] = {
    "dag_cache_dir": _option(
        "string",
        "",
        "Directory of the DAG file's cache of built DAGs (one file per DAG file, shards of tables). Empty: "
        "$AIRFLOW_HOME/tablemgmt/dag-cache. 'off' turns the cache off.",
        "/var/cache/airflow/tablemgmt-dags",
    ),
    "triggerers": _option(
        "integer",
        "1",
        "How many triggerers run (Airflow does not tell a DAG file). A full parse warns when the tables' "
        "snapshot watchers exceed [triggerer] capacity times this number.",
        "3",
    ),
    "watcher_catalog_calls_per_second": _option(
        "float",
        "200",
        "Snapshot watchers of a catalog without a batched change check (REST, Hive, Glue, hadoop on object "
        "storage, path-based formats): the most per-table catalog calls per second one triggerer makes for "
        "that catalog and poll interval; a table is then checked every max(poll-interval, tables / this).",
        "500",
    ),
    "jvm_class_cache": _option(
        "boolean",
        "True",
        "Start Spark drivers with a class-data-sharing archive of the classes they load (faster JVM "
        "start-up). False never uses or creates one.",
        "False",
    ),
    "jvm_class_cache_dir": _option(
        "string",
        "",
        "Directory of the JVM class-data archives. Empty: ~/.cache/airflow-tablemgmt/jvm.",
        "/var/cache/airflow/tablemgmt-jvm",
    ),
    "jars_dir": _option(
        "string",
        "",
        "Directory of the Spark artifacts fetched from the Maven repository (checksums verified, fetched "
        "once per host; `tablemgmt jars fetch` fills it ahead). Empty: $XDG_CACHE_HOME/airflow-tablemgmt/jars, "
        "else ~/.cache/airflow-tablemgmt/jars.",
        "/opt/airflow/jars",
    ),
    "maven_repository": _option(
        "string",
        "https://repo1.maven.org/maven2",
        "The Maven repository Spark artifacts are fetched from (a mirror or a proxy of Maven Central).",
        "https://nexus.example.com/repository/maven-central",
    ),
    "jars_offline": _option(
        "boolean",
        "False",
        "Never download: a Spark artifact missing from jars_dir fails the task with the command that "
        "fetches it (for workers without network access; fill jars_dir in the image).",
        "True",
    ),
    "spark_connect_conn_id": _option(
        "string",
        "",
        "A spark_connect connection: the tables spark_connect_tables selects run on that Spark Connect server "
        "(the task a thin gRPC client, no JVM) instead of spark-submit. Empty: spark-submit for every table. "
        "Dynamic tables' refreshes always use spark-submit (docs/spark-connect.md).",
        "spark_connect_default",
    ),
    "spark_connect_tables": _option(
        "string",
        "",
        "Which tables run on spark_connect_conn_id: shell patterns separated by commas, matched against the "
        "table id (catalog.namespace.name) and the catalog name. Empty: every table.",
        "lake, warehouse.small_*",
    ),
    "job_env_allow": _option(
        "string",
        "",
        "Environment variables a Spark job may inherit beyond the built-in allow-list (SPARK_*, PYSPARK_*, "
        "HADOOP_*, JAVA_HOME, ...): names separated by commas or spaces, NAME* for a prefix.",
        "AWS_REGION, MY_TEAM_*",
    ),
    "refresh_timeout": _option(
        "string",
        "",
        "How long one refresh (or creation) of a dynamic table may take: the task's execution_timeout, and the "
        "job's own wall clock (timeout_seconds), after which the process ends FAILED naming the limit. A "
        "table's timeout: overrides it. Empty: the table's freshness period (freshness downstream: 1h). "
        "Never above refresh_timeout_max (docs/scheduling.md, Time limits).",
        "30m",
    ),
    "refresh_timeout_max": _option(
        "string",
        "6h",
        "The cap of every refresh's time limit: a larger refresh_timeout or table timeout: is capped to it.",
        "12h",
    ),
    "maintenance_timeout": _option(
        "string",
        "4h",
        "How long one maintenance run (compaction, expiry, orphan clean-up...) may take: the task's "
        "execution_timeout; an action's timeout: option overrides it (docs/scheduling.md, Time limits).",
        "8h",
    ),
    "user_sql_authors": _option(
        "string",
        "role:admin",
        "Who may define user SQL over the REST API: create or alter a dynamic table, or refresh / resume one "
        "with Spark session options. Entries separated by commas, any match allows: role:<name> (the auth "
        "manager's role, e.g. admin, op), user:<name>, permission:<connection|variable|configuration|pool>:"
        "<GET|POST|PUT|DELETE> (the auth manager's answer), or * (anyone with the refresh DAG's permission). "
        "An unreadable value allows nobody. tables.yaml and the CLI are trusted (docs/security.md).",
        "role:admin, role:op, user:data-platform-bot",
    ),
    "user_sql_sandbox": _option(
        "string",
        "on",
        "Whether a dynamic table's Spark job (which runs user SQL in its driver) starts spark-submit in new user, "
        "PID and mount namespaces that hide other processes, AIRFLOW_HOME, the DAGs and plugins folders and "
        "make the Python prefix and the package read-only (docs/security.md, Sandbox). on: such a job fails "
        "where the kernel does not allow unprivileged user namespaces; off: they run unsandboxed.",
        "off",
    ),
    "user_sql_hide": _option(
        "string",
        "",
        "More paths the sandboxed job of a dynamic table must not see, beyond AIRFLOW_HOME, AIRFLOW_CONFIG and "
        "the DAGs and plugins folders: absolute paths separated by commas or spaces (a directory gets an empty "
        "tmpfs over it, a file an empty one).",
        "/etc/airflow-secrets, /srv/store.db",
    ),
    "notify": _option(
        "string",
        "",
        "Notifications for every table, as JSON: Airflow notifiers by class path with their kwargs, the "
        "events (failed, failing-streak, suspended, unhealthy; default all), the failing streak's length "
        "(failing-streak, default 3) and the health score under which a table is unhealthy (health-below, "
        "default 50; sent once per crossing, measured after each process); the same document as a table's "
        "notify: (docs/notifications.md). Empty: none.",
        '{"notifiers": [{"class": "airflow.providers.smtp.notifications.smtp.SmtpNotifier", '
        '"kwargs": {"to": "data-platform@example.com"}}], '
        '"events": ["failed", "failing-streak", "suspended", "unhealthy"], "failing-streak": 3, "health-below": 50}',
    ),
    "plan_batch_size": _option(
        "integer",
        "50",
        "Tables per batch in a policy's planned (policy, action) run: each mapped task runs its batch's tables "
        "one after another on one warm engine (docs/adr/0004-fleet-planning.md).",
        "100",
    ),
    "plan_batch_overlap": _option(
        "boolean",
        "True",
        "Whether a planned batch runs each table's bookkeeping (its result, health, alerts, and the next "
        "table's checks, process row and lease) in a thread beside the next table's job; the jobs themselves "
        "still run one at a time and in order (docs/planning.md).",
        "False",
    ),
    "plan_health_max_age": _option(
        "string",
        "1d",
        "A policy table's stored health older than this (a duration: 30m, 6h, 1d) is measured again before "
        "the planning step decides whether an action pays on it (docs/adr/0004-fleet-planning.md).",
        "6h",
    ),
    "plan_max_active_batches": _option(
        "integer",
        "4",
        "Batches of one policy's planned (policy, action) DAG running at once (the mapped run_batch task's "
        "max_active_tis_per_dag): each runs its tables one after another, so this bounds that DAG's jobs at "
        "once; a Spark Connect server's own slots bound them further (docs/planning.md).",
        "8",
    ),
    "plan_max_active_runs": _option(
        "integer",
        "16",
        "Runs of one policy's planned (policy, action) DAG at once when the action runs on its tables' new "
        "snapshots: a run for new events starts while earlier ones still run, their batches sharing "
        "plan_max_active_batches and each table run by whoever holds its lease; a DAG on an interval only runs "
        "one at a time (docs/planning.md).",
        "4",
    ),
    "plan_shared_driver": _option(
        "boolean",
        "True",
        "Whether a planned batch on spark-submit runs its tables one after another in ONE driver (one JVM and "
        "session per batch, each table still under its own lease, process and time limit); False: each table "
        "is a spark-submit application of its own (docs/planning.md).",
        "False",
    ),
    "plan_measure_budget": _option(
        "integer",
        "200",
        "Tables a planning task measures at most (their metadata, no JVM) when their stored health is missing, "
        "too old or measured with other settings; the rest wait for the next run; 0 measures none "
        "(docs/planning.md).",
        "1000",
    ),
}

SECTION: dict[str, Any] = {
    "tablemgmt": {
        "description": "airflow-tablemgmt: table maintenance and dynamic tables on Airflow (docs/provider.md).",
        "options": OPTIONS,
    }
}
