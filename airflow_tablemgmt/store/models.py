"""The store's tables. Every name is prefixed ``tms_`` so the schema can share a database.

These tables describe the schema (and are what Alembic compares migrations against); the
repositories query them with Core statements and hand out ``core`` dataclasses, never rows.
Enumerations (owner, status, format) are plain strings validated in Python, so adding a value
never needs a migration.

They are SQLAlchemy Core ``Table`` objects, not ORM classes: nothing maps rows to objects, and the
ORM's import alone (about 40 ms) is start-up time every ``tablemgmt run`` and task process would pay.
Each ``*Row`` class holds its table as ``__table__`` (where the ORM would put it), and ``Base.metadata``
is the schema's ``MetaData``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from airflow_tablemgmt.store.sqltypes import UtcDateTime, big_id, json_document

#: Alembic's bookkeeping table; not ``alembic_version``, which Airflow's own schema uses.
VERSION_TABLE = "tms_alembic_version"
#: The newest migration, i.e. the schema these models describe. Bump it with every migration
#: (a test checks it against the migration scripts); it lets a process check the schema
#: without importing Alembic.
SCHEMA_REVISION = "0013"

# Deterministic constraint names, so later migrations can refer to them on every backend.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

ID_LEN = 128  # core.identifiers allows at most 128 characters per part
TABLE_ID_LEN = 3 * ID_LEN + 2
POLICY_NAME_LEN = 63  # core.policies' policy names


class Base:
    """The schema: ``Base.metadata`` holds every table below."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


def _required(name: str, type_: Any, **kwargs: Any) -> Column[Any]:
    return Column(name, type_, nullable=False, **kwargs)


def _optional(name: str, type_: Any) -> Column[Any]:
    return Column(name, type_, nullable=True)


class CatalogRow:
    __table__ = Table(
        "tms_catalog",
        Base.metadata,
        Column("name", String(ID_LEN), primary_key=True),
        _required("type", String(32)),
        _optional("warehouse", String(2048)),
        _required("properties", json_document()),
        _required("owner", String(8)),
        _required("created_at", UtcDateTime()),
        _required("updated_at", UtcDateTime()),
    )


class TableRow:
    __table__ = Table(
        "tms_table",
        Base.metadata,
        Column("id", big_id(), primary_key=True, autoincrement=True),
        _required("table_id", String(TABLE_ID_LEN), unique=True),
        _required("catalog", String(ID_LEN)),
        _required("namespace", String(ID_LEN)),
        _required("name", String(ID_LEN)),
        _required("format", String(32)),
        _required("owner_team", String(255)),  # TableSpec.owner: the DAGs' owner
        _required("managed_by", String(8)),  # core.tables.Owner: who may change the row
        _required("queue", String(ID_LEN)),
        _required("priority", Integer),
        _required("actions", json_document()),
        _required("spec", json_document()),  # TableSpec, by alias, mode=json
        _optional(
            "dynamic", json_document()
        ),  # dynamic-table definition (its refresh-mode upper-cased: 0013)
        _optional("policy", String(POLICY_NAME_LEN)),  # the policy that enrolled it (managed_by policy; 0010)
        _optional("deleted_at", UtcDateTime()),
        _required("created_at", UtcDateTime()),
        _required("updated_at", UtcDateTime()),
        # a policy's enrolled tables in table-id order: the planning step's read (store/planning.py; 0012)
        Index("ix_tms_table_policy_table_id", "policy", "table_id"),
    )


class ProcessRow:
    __table__ = Table(
        "tms_process",
        Base.metadata,
        Column("id", big_id(), primary_key=True, autoincrement=True),
        _required("table_id", String(TABLE_ID_LEN)),
        _required("action", String(64)),
        _required("instant", UtcDateTime()),
        _required("status", String(16)),
        _required("attempt", Integer),
        _required("engine", String(255)),  # spark-submit, or spark-connect <server> (0006)
        _optional("external_id", String(255)),  # Spark application id
        _optional("snapshot_id", BigInteger),  # table snapshot the process saw
        _required("parameters", json_document()),
        _optional("summary", json_document()),
        _optional("failure_reason", Text),
        _optional("dag_id", String(250)),
        _optional("run_id", String(250)),
        _optional("task_id", String(250)),
        _required("created_at", UtcDateTime()),
        _optional("started_at", UtcDateTime()),
        _optional("finished_at", UtcDateTime()),
        _optional("heartbeat_at", UtcDateTime()),
        _optional("heartbeat_every_s", Float),  # the interval the worker promised (migration 0004)
        _optional("lease_acquired_at", UtcDateTime()),  # the table's lease taken (migration 0007)
        # What the run cost, from Spark's task metrics (core/cost.py; migration 0011); null: not measured
        _optional("core_seconds", Float),
        _optional("cpu_seconds", Float),
        _optional("bytes_read", BigInteger),
        _optional("bytes_written", BigInteger),
        UniqueConstraint("table_id", "action", "instant"),
        Index("ix_tms_process_table_id_action_status", "table_id", "action", "status"),
        Index("ix_tms_process_status", "status"),
    )


class LeaseRow:
    __table__ = Table(
        "tms_lease",
        Base.metadata,
        Column("table_id", String(TABLE_ID_LEN), primary_key=True),
        _required("holder", String(255)),
        _required("acquired_at", UtcDateTime()),
        _required("expires_at", UtcDateTime()),
    )


class DeclarationFileRow:
    """What the last clean sync of one declarations file (``tables.yaml``, ``tables.d/*.yaml``) wrote.

    A parse that finds the file's bytes (``digest``) and validation context (``context``: the
    validating code and the catalogs other files declare) unchanged reuses it instead of loading
    and validating the YAML again; ``entries`` binds each table to its entry's hash and to the
    ``updated_at`` of the row that sync left, so a row changed since is never reused.
    """

    __table__ = Table(
        "tms_declaration_file",
        Base.metadata,
        Column("source", String(1024), primary_key=True),
        _required("digest", String(64)),
        _required("context", String(64)),
        _required("declares_tables", Boolean),
        _required("catalogs", json_document()),
        _required("entries", json_document()),  # table_id -> [entry hash, updated_at]
        _required("errors", json_document()),  # [[table, message], ...]
        _required("updated_at", UtcDateTime()),
    )


class PolicyRow:
    """A maintenance policy (migration 0009): its validated spec (``core/policies.py``), who may change it
    (``code``: a declarations file, ``source``; ``store``: REST or the CLI) and when (``store/policies.py``)."""

    __table__ = Table(
        "tms_policy",
        Base.metadata,
        Column("name", String(63), primary_key=True),  # core.policies' policy names: at most 63 chars
        _required("spec", json_document()),  # Policy, by alias, mode=json
        _required("managed_by", String(8)),  # core.tables.Owner
        _optional("source", String(1024)),  # the declarations file of a code-owned policy
        _required("created_at", UtcDateTime()),
        _required("updated_at", UtcDateTime()),
    )


class HealthAlertRow:
    """Whether a table's health score is below a notification threshold, as last measured (migration 0005):
    the ``unhealthy`` notification is sent by whoever flips ``below`` (``store/health_alerts.py``)."""

    __table__ = Table(
        "tms_health_alert",
        Base.metadata,
        Column("table_id", String(TABLE_ID_LEN), primary_key=True),
        Column("threshold", Integer, primary_key=True),
        _required("below", Boolean),
        _required("score", Integer),
        _required("changed_at", UtcDateTime()),
        _required("measured_at", UtcDateTime()),
    )


class ConnectSlotRow:
    """One slot of a Spark Connect server (migration 0006): its holder (a task, with a lease expiry) and the
    server-side session it left configured for the next task of the same settings (``store/connect_slots.py``)."""

    __table__ = Table(
        "tms_connect_slot",
        Base.metadata,
        Column("server", String(255), primary_key=True),  # sc://host:port, no parameters
        Column("slot", Integer, primary_key=True),
        _optional("session_id", String(64)),
        _optional("settings_hash", String(64)),
        _optional("holder", String(255)),
        _optional("expires_at", UtcDateTime()),
        _optional("used_at", UtcDateTime()),
    )


class TableHealthRow:
    """Each table's last health measurement (migration 0008), written with the health cache's entry
    (``store/table_health.py``): the list sorts and filters on ``score`` / ``needs_attention`` in SQL, and
    the overview sums the figure columns, whichever process measured the table."""

    __table__ = Table(
        "tms_table_health",
        Base.metadata,
        Column("table_id", String(TABLE_ID_LEN), primary_key=True),
        _required("score", Integer),
        _required("needs_attention", Boolean),
        _required("kinds", String(1024)),  # the findings as ",kind=action,...,": attention per kind
        _required("data_files", BigInteger),
        _required("data_bytes", BigInteger),
        _required("excess_data_files", BigInteger),
        _required("figures", json_document()),  # the measured figures (FileStats' fields)
        _required("measured_at", UtcDateTime()),
        Index("ix_tms_table_health_score_table_id", "score", "table_id"),
        Index("ix_tms_table_health_needs_attention_table_id", "needs_attention", "table_id"),
        # covers the overview's sums and its count per kind: a scan of the index, not of the figures
        Index(
            "ix_tms_table_health_sums",
            "needs_attention",
            "kinds",
            "score",
            "data_files",
            "data_bytes",
            "excess_data_files",
        ),
    )


class ActionLatestRow:
    """The newest process (by instant) of each (table, action) and its status (migration 0008), kept by
    ``store/process_rollup.py`` in the transaction that opens or moves a process: the overview's status
    counts and failing list without a scan of every process."""

    __table__ = Table(
        "tms_action_latest",
        Base.metadata,
        Column("table_id", String(TABLE_ID_LEN), primary_key=True),
        Column("action", String(64), primary_key=True),
        _required("process_id", BigInteger),
        _required("instant", UtcDateTime()),
        _required("status", String(16)),
        Index("ix_tms_action_latest_status_instant", "status", "instant"),
        Index("ix_tms_action_latest_process_id", "process_id"),
    )


class ProcessDoneRow:
    """One row per finished process (migration 0008): when it finished, its status and the files and bytes
    it removed, kept by ``store/process_rollup.py`` when the process finishes (and dropped when a retry
    reopens it): the overview's 24 h / 7 d / 30 d figures without reading every summary's JSON."""

    __table__ = Table(
        "tms_process_done",
        Base.metadata,
        Column("process_id", BigInteger, primary_key=True),
        _required("finished_at", UtcDateTime()),
        _required("hour", String(13)),  # UTC 'YYYY-MM-DD HH'
        _required("action", String(64)),
        _required("status", String(16)),
        _required("files_removed", BigInteger),
        _required("bytes_removed", BigInteger),
        # the process's table and cost (migration 0011), for the per-day sums (``tms_process_day``)
        _optional("table_id", String(TABLE_ID_LEN)),
        _optional("core_seconds", Float),
        _optional("cpu_seconds", Float),
        _optional("bytes_read", BigInteger),
        _optional("bytes_written", BigInteger),
        Index("ix_tms_process_done_finished_at", "finished_at"),
    )


class ProcessHourRow:
    """``tms_process_done`` summed per UTC hour, action and status (migration 0008), kept with it: the
    overview reads whole hours here and only the window's first, partial hour from the rows."""

    __table__ = Table(
        "tms_process_hour",
        Base.metadata,
        Column("hour", String(13), primary_key=True),
        Column("action", String(64), primary_key=True),
        Column("status", String(16), primary_key=True),
        _required("n", BigInteger),
        _required("files_removed", BigInteger),
        _required("bytes_removed", BigInteger),
    )


class ProcessDayRow:
    """``tms_process_done`` summed per UTC day, table, action and status (migration 0011), kept with it
    (``store/process_cost.py``): the cost per table, policy and day (the policy is the table's, joined)
    without reading every process. ``measured`` counts the processes whose cost is known."""

    __table__ = Table(
        "tms_process_day",
        Base.metadata,
        Column("day", String(10), primary_key=True),  # UTC 'YYYY-MM-DD'
        Column("table_id", String(TABLE_ID_LEN), primary_key=True),
        Column("action", String(64), primary_key=True),
        Column("status", String(16), primary_key=True),
        _required("n", BigInteger),
        _required("measured", BigInteger),
        _required("core_seconds", Float),
        _required("cpu_seconds", Float),
        _required("bytes_read", BigInteger),
        _required("bytes_written", BigInteger),
        _required("files_removed", BigInteger),
        _required("bytes_removed", BigInteger),
        Index("ix_tms_process_day_table_id_day", "table_id", "day"),
    )


class EnrolmentRow:
    """One change discovery made (migration 0010): a table enrolled by a policy, retired (dropped from its
    catalog, opted out, or no longer matched), re-enrolled when it came back, or its settings updated when
    its policy changed (``store/enrolment.py``). Rows are only ever added."""

    __table__ = Table(
        "tms_enrolment",
        Base.metadata,
        Column("id", big_id(), primary_key=True, autoincrement=True),
        _required("at", UtcDateTime()),
        _required("policy", String(POLICY_NAME_LEN)),
        _required("table_id", String(TABLE_ID_LEN)),
        _required("change", String(16)),  # enrolled | retired | re-enrolled | updated
        _required("reason", Text),
        Index("ix_tms_enrolment_at", "at"),
        Index("ix_tms_enrolment_table_id_at", "table_id", "at"),
        Index("ix_tms_enrolment_policy_at", "policy", "at"),
    )
