"""The store's tables. Every name is prefixed ``tms_`` so the schema can share a database.

These classes describe the schema (and are what Alembic compares migrations against); the
repositories query them with Core statements and hand out ``core`` dataclasses, never rows.
Enumerations (owner, status, format) are plain strings validated in Python, so adding a value
never needs a migration.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Boolean, Index, Integer, MetaData, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from airflow_tablemgmt.store.sqltypes import UtcDateTime, big_id, json_document

#: Alembic's bookkeeping table; not ``alembic_version``, which Airflow's own schema uses.
VERSION_TABLE = "tms_alembic_version"
#: The newest migration, i.e. the schema these models describe. Bump it with every migration
#: (a test checks it against the migration scripts); it lets a process check the schema
#: without importing Alembic.
SCHEMA_REVISION = "0003"

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


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class CatalogRow(Base):
    __tablename__ = "tms_catalog"

    name: Mapped[str] = mapped_column(String(ID_LEN), primary_key=True)
    type: Mapped[str] = mapped_column(String(32))
    warehouse: Mapped[str | None] = mapped_column(String(2048))
    properties: Mapped[dict[str, Any]] = mapped_column(json_document())
    owner: Mapped[str] = mapped_column(String(8))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())


class TableRow(Base):
    __tablename__ = "tms_table"

    id: Mapped[int] = mapped_column(big_id(), primary_key=True, autoincrement=True)
    table_id: Mapped[str] = mapped_column(String(TABLE_ID_LEN), unique=True)
    catalog: Mapped[str] = mapped_column(String(ID_LEN))
    namespace: Mapped[str] = mapped_column(String(ID_LEN))
    name: Mapped[str] = mapped_column(String(ID_LEN))
    format: Mapped[str] = mapped_column(String(32))
    owner_team: Mapped[str] = mapped_column(String(255))  # TableSpec.owner: the DAGs' owner
    managed_by: Mapped[str] = mapped_column(String(8))  # core.tables.Owner: who may change the row
    queue: Mapped[str] = mapped_column(String(ID_LEN))
    priority: Mapped[int] = mapped_column(Integer)
    actions: Mapped[dict[str, Any]] = mapped_column(json_document())
    spec: Mapped[dict[str, Any]] = mapped_column(json_document())  # TableSpec, by alias, mode=json
    dynamic: Mapped[dict[str, Any] | None] = mapped_column(json_document())  # dynamic-table definition
    deleted_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())


class ProcessRow(Base):
    __tablename__ = "tms_process"
    __table_args__ = (
        UniqueConstraint("table_id", "action", "instant"),
        Index("ix_tms_process_table_id_action_status", "table_id", "action", "status"),
        Index("ix_tms_process_status", "status"),
    )

    id: Mapped[int] = mapped_column(big_id(), primary_key=True, autoincrement=True)
    table_id: Mapped[str] = mapped_column(String(TABLE_ID_LEN))
    action: Mapped[str] = mapped_column(String(64))
    instant: Mapped[datetime] = mapped_column(UtcDateTime())
    status: Mapped[str] = mapped_column(String(16))
    attempt: Mapped[int] = mapped_column(Integer)
    engine: Mapped[str] = mapped_column(String(32))
    external_id: Mapped[str | None] = mapped_column(String(255))  # Spark application id
    snapshot_id: Mapped[int | None] = mapped_column(BigInteger)  # table snapshot the process saw
    parameters: Mapped[dict[str, Any]] = mapped_column(json_document())
    summary: Mapped[dict[str, Any] | None] = mapped_column(json_document())
    failure_reason: Mapped[str | None] = mapped_column(Text)
    dag_id: Mapped[str | None] = mapped_column(String(250))
    run_id: Mapped[str | None] = mapped_column(String(250))
    task_id: Mapped[str | None] = mapped_column(String(250))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime())
    started_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    heartbeat_at: Mapped[datetime | None] = mapped_column(UtcDateTime())


class LeaseRow(Base):
    __tablename__ = "tms_lease"

    table_id: Mapped[str] = mapped_column(String(TABLE_ID_LEN), primary_key=True)
    holder: Mapped[str] = mapped_column(String(255))
    acquired_at: Mapped[datetime] = mapped_column(UtcDateTime())
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime())


class DeclarationFileRow(Base):
    """What the last clean sync of one declarations file (``tables.yaml``, ``tables.d/*.yaml``) wrote.

    A parse that finds the file's bytes (``digest``) and validation context (``context``: the
    validating code and the catalogs other files declare) unchanged reuses it instead of loading
    and validating the YAML again; ``entries`` binds each table to its entry's hash and to the
    ``updated_at`` of the row that sync left, so a row changed since is never reused.
    """

    __tablename__ = "tms_declaration_file"

    source: Mapped[str] = mapped_column(String(1024), primary_key=True)
    digest: Mapped[str] = mapped_column(String(64))
    context: Mapped[str] = mapped_column(String(64))
    declares_tables: Mapped[bool] = mapped_column(Boolean)
    catalogs: Mapped[list[str]] = mapped_column(json_document())
    entries: Mapped[dict[str, Any]] = mapped_column(json_document())  # table_id -> [entry hash, updated_at]
    errors: Mapped[list[Any]] = mapped_column(json_document())  # [[table, message], ...]
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime())
