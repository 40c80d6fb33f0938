"""``TableRepository``: the table registry (``tms_table``), with ownership and soft delete."""

from __future__ import annotations

import builtins
import difflib
import logging
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, cast

from pydantic import ValidationError
from sqlalchemy import ColumnElement, Connection, Engine, Row, Table, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from airflow_tablemgmt.core.errors import (
    InvalidDeclaration,
    TableManagedByCode,
    TableMgmtError,
    TableNotFound,
    UnreadableTable,
)
from airflow_tablemgmt.core.tables import Owner, TableSpec, format_validation_error
from airflow_tablemgmt.store.clock import utcnow
from airflow_tablemgmt.store.errors import TableManagedByPolicy, TableManagedByStore
from airflow_tablemgmt.store.models import TableRow

log = logging.getLogger(__name__)

_T = cast(Table, TableRow.__table__)
_RETRIES = 5
_CHUNK = 500  # ids per IN (...) list; far below every backend's bound-parameter limit

UpsertResult = Literal["created", "updated", "unchanged"]


@dataclass(frozen=True)
class RegisteredTable:
    """A table as the registry holds it: its spec and who may change it."""

    spec: TableSpec
    managed_by: Owner
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None = None  # set only for rows listed with include_deleted=True
    #: The policy that enrolled it (``managed_by`` is ``policy``), else None (``store/enrolment.py``).
    policy: str | None = None

    @property
    def table_id(self) -> str:
        return self.spec.id


@dataclass(frozen=True)
class UnreadableRow:
    """A stored row that no longer validates, skipped by :meth:`TableRepository.list`."""

    table_id: str
    message: str


class TableRepository:
    """Registered tables by ``catalog.namespace.name``.

    One writer per table: a row managed by CODE (dags/tables.yaml) refuses STORE writers
    (REST / CLI). Removal is a soft delete (``deleted_at``), so process history keeps its
    table and a later upsert revives the row.
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def upsert(self, spec: TableSpec, owner: Owner) -> UpsertResult:
        """Register or update ``spec`` for ``owner``.

        Returns "created" for a new row (or a revived soft-deleted one), "updated" when the spec
        or the owner changed, "unchanged" otherwise, in which case nothing is written. A STORE
        writer on a live CODE row raises :class:`TableManagedByCode`; a CODE writer takes over a
        store-owned row (the file is re-applied on every parse and must win deterministically).
        """
        owner = Owner(owner)
        spec = _validated(spec)
        columns = _columns_of(spec)
        doc = columns["spec"]
        table_id = spec.id
        for _ in range(_RETRIES):
            with self._engine.connect() as conn:
                row = conn.execute(select(_T).where(_T.c.table_id == table_id)).first()
            now = utcnow()
            if row is None:
                try:
                    with self._engine.begin() as conn:
                        conn.execute(
                            insert(_T).values(
                                table_id=table_id,
                                managed_by=str(owner),
                                created_at=now,
                                updated_at=now,
                                **columns,
                            )
                        )
                    return "created"
                except IntegrityError:
                    continue  # registered concurrently: compare against that row
            live = row.deleted_at is None
            if live and row.managed_by == Owner.CODE and owner == Owner.STORE:
                raise TableManagedByCode(table_id)
            if live and row.managed_by == owner and row.spec == doc:
                return "unchanged"
            if live and row.managed_by != owner:
                log.warning(
                    "table %s: its %s declaration takes it over from %s", table_id, owner, row.managed_by
                )
            values = dict(columns, managed_by=str(owner), updated_at=now, deleted_at=None)
            if not live:
                values["created_at"] = now  # a revived table is a new registration
            with self._engine.begin() as conn:
                changed = conn.execute(update(_T).where(*_unchanged_since(row)).values(**values)).rowcount
            if changed == 1:
                return "updated" if live else "created"
        raise TableMgmtError(f"table {table_id}: gave up after {_RETRIES} concurrent modifications")

    def upsert_many(self, specs: Collection[TableSpec], owner: Owner) -> dict[str, UpsertResult]:
        """:meth:`upsert` for many specs in one transaction with batched statements (the first sync
        of a large declarations file): one ``SELECT ... IN`` per chunk, one multi-row ``INSERT`` for
        the new tables, one ``UPDATE`` per changed row. Same rules and outcomes as :meth:`upsert`;
        every spec is validated again from its serialized form first. If another writer gets in
        between (a unique-key clash, a row changed since it was read) the batch is rolled back and
        each spec goes through :meth:`upsert`, which retries row by row.
        """
        owner = Owner(owner)
        if owner != Owner.CODE:  # a STORE writer may be refused per row: keep those errors per row
            return {spec.id: self.upsert(spec, owner) for spec in specs}
        prepared = [(spec.id, _columns_of(_validated(spec))) for spec in specs]
        try:
            return self._upsert_batch(prepared, owner)
        except (IntegrityError, _Contended):
            return {spec.id: self.upsert(spec, owner) for spec in specs}

    def _upsert_batch(
        self, prepared: builtins.list[tuple[str, dict[str, Any]]], owner: Owner
    ) -> dict[str, UpsertResult]:
        out: dict[str, UpsertResult] = {}
        with self._engine.begin() as conn:
            existing: dict[str, Row[Any]] = {}
            ids = [tid for tid, _ in prepared]
            for i in range(0, len(ids), _CHUNK):
                for row in conn.execute(select(_T).where(_T.c.table_id.in_(ids[i : i + _CHUNK]))):
                    existing[row.table_id] = row
            now = utcnow()
            new_rows: builtins.list[dict[str, Any]] = []
            for table_id, columns in prepared:
                found = existing.get(table_id)
                if found is None:
                    new_rows.append(
                        dict(
                            columns, table_id=table_id, managed_by=str(owner), created_at=now, updated_at=now
                        )
                    )
                    out[table_id] = "created"
                    continue
                live = found.deleted_at is None
                if live and found.managed_by == owner and found.spec == columns["spec"]:
                    out[table_id] = "unchanged"
                    continue
                if live and found.managed_by != owner:
                    log.warning(
                        "table %s: its code declaration takes it over from %s", table_id, found.managed_by
                    )
                values = dict(columns, managed_by=str(owner), updated_at=now, deleted_at=None)
                if not live:
                    values["created_at"] = now
                if conn.execute(update(_T).where(*_unchanged_since(found)).values(**values)).rowcount != 1:
                    raise _Contended(table_id)
                out[table_id] = "updated" if live else "created"
            for i in range(0, len(new_rows), _CHUNK):
                conn.execute(insert(_T), new_rows[i : i + _CHUNK])  # executemany: batched INSERTs
        return out

    def updated_at_of(self, table_ids: Collection[str]) -> dict[str, datetime]:
        """``updated_at`` of the live code-owned rows among ``table_ids`` (one query per chunk)."""
        ids = builtins.list(table_ids)
        out: dict[str, datetime] = {}
        with self._engine.connect() as conn:
            for i in range(0, len(ids), _CHUNK):
                stmt = select(_T.c.table_id, _T.c.updated_at).where(
                    _T.c.table_id.in_(ids[i : i + _CHUNK]),
                    _T.c.deleted_at.is_(None),
                    _T.c.managed_by == str(Owner.CODE),
                )
                out.update({tid: ts for tid, ts in conn.execute(stmt)})
        return out

    def get(self, table_id: str) -> TableSpec:
        """The live table's spec; :class:`TableNotFound` if absent or removed."""
        return self.get_registered(table_id).spec

    def get_registered(self, table_id: str) -> RegisteredTable:
        with self._engine.connect() as conn:
            row = conn.execute(select(_T).where(_T.c.table_id == table_id)).first()
            if row is None or row.deleted_at is not None:
                raise TableNotFound(_not_found_message(conn, table_id, row))
        return _to_registered(row)

    def list(self, include_deleted: bool = False) -> builtins.list[RegisteredTable]:
        """Tables sorted by table_id; removed ones only with ``include_deleted``.

        A row that no longer validates is skipped (and logged), never fatal to the others; see
        :meth:`list_with_errors` to report it.
        """
        rows, errors = self.list_with_errors(include_deleted)
        for err in errors:
            log.warning("%s", err.message)
        return rows

    def list_with_errors(
        self, include_deleted: bool = False
    ) -> tuple[builtins.list[RegisteredTable], builtins.list[UnreadableRow]]:
        """``(tables that load, rows that do not)``, each sorted by table_id."""
        stmt = select(_T).order_by(_T.c.table_id)
        if not include_deleted:
            stmt = stmt.where(_T.c.deleted_at.is_(None))
        with self._engine.connect() as conn:
            rows = conn.execute(stmt).all()
        loaded: builtins.list[RegisteredTable] = []
        errors: builtins.list[UnreadableRow] = []
        for r in rows:
            try:
                loaded.append(_to_registered(r))
            except UnreadableTable as e:
                errors.append(UnreadableRow(e.table_id, str(e)))
        return loaded, errors

    def remove(self, table_id: str, owner: Owner) -> None:
        """Soft-delete a live table on behalf of ``owner``.

        :class:`TableNotFound` if absent or already removed; :class:`TableManagedByCode` when the
        store removes a code-owned table; :class:`TableManagedByStore` the other way round.
        """
        owner = Owner(owner)
        for _ in range(_RETRIES):
            with self._engine.connect() as conn:
                row = conn.execute(select(_T).where(_T.c.table_id == table_id)).first()
                if row is None or row.deleted_at is not None:
                    raise TableNotFound(_not_found_message(conn, table_id, row))
            if row.managed_by != owner:
                if row.managed_by == Owner.POLICY:
                    raise TableManagedByPolicy(table_id, row.policy)
                raise (
                    TableManagedByCode(table_id)
                    if row.managed_by == Owner.CODE
                    else TableManagedByStore(table_id)
                )
            now = utcnow()
            with self._engine.begin() as conn:
                changed = conn.execute(
                    update(_T).where(*_unchanged_since(row)).values(deleted_at=now, updated_at=now)
                ).rowcount
            if changed == 1:
                return
        raise TableMgmtError(f"table {table_id}: gave up after {_RETRIES} concurrent modifications")

    def prune_code_tables(self, keep: Collection[str]) -> builtins.list[str]:
        """Soft-delete the live code-owned tables whose id is not in ``keep``; return their ids.

        This is how a table deleted from dags/tables.yaml leaves the registry. Store-owned
        tables are never touched.
        """
        keep = set(keep)
        code_live = (_T.c.managed_by == str(Owner.CODE), _T.c.deleted_at.is_(None))
        with self._engine.begin() as conn:
            ids = conn.execute(select(_T.c.table_id).where(*code_live)).scalars().all()
            doomed = sorted(set(ids) - keep)
            now = utcnow()
            for i in range(0, len(doomed), _CHUNK):
                chunk = doomed[i : i + _CHUNK]
                conn.execute(
                    update(_T)
                    .where(_T.c.table_id.in_(chunk), *code_live)
                    .values(deleted_at=now, updated_at=now)
                )
        if doomed:
            log.info("removed %d table(s) no longer declared in dags/tables.yaml: %s", len(doomed), doomed)
        return doomed

    def remove_code_tables(self, table_ids: Collection[str]) -> builtins.list[str]:
        """Soft-delete those of ``table_ids`` that are live and code-owned; return their ids.

        How a clean declarations file prunes the tables it wrote and no file declares any more.
        """
        ids = sorted(set(table_ids))
        code_live = (_T.c.managed_by == str(Owner.CODE), _T.c.deleted_at.is_(None))
        removed: builtins.list[str] = []
        with self._engine.begin() as conn:
            now = utcnow()
            for i in range(0, len(ids), _CHUNK):
                chunk = ids[i : i + _CHUNK]
                removed += conn.execute(
                    select(_T.c.table_id).where(_T.c.table_id.in_(chunk), *code_live)
                ).scalars()
                conn.execute(
                    update(_T)
                    .where(_T.c.table_id.in_(chunk), *code_live)
                    .values(deleted_at=now, updated_at=now)
                )
        if removed:
            log.info(
                "removed %d table(s) no longer declared in any declarations file: %s", len(removed), removed
            )
        return sorted(removed)

    def fingerprint(self) -> str:
        """A cheap token that changes whenever any table is created, changed or removed.

        One aggregate query (row count, newest ``updated_at``, newest ``deleted_at``), so the DAG
        file can cache its registry read and re-read only when this changes.
        """
        with self._engine.connect() as conn:
            count, updated, deleted = conn.execute(
                select(func.count(), func.max(_T.c.updated_at), func.max(_T.c.deleted_at))
            ).one()
        return "|".join((str(count), _iso(updated), _iso(deleted)))


class _Contended(Exception):
    """A row changed between the batch's read and its write."""


def _columns_of(spec: TableSpec) -> dict[str, Any]:
    doc = spec.model_dump(mode="json", by_alias=True)
    return {
        "catalog": spec.catalog,
        "namespace": spec.namespace,
        "name": spec.name,
        "format": str(spec.format),
        "owner_team": spec.owner,
        "queue": spec.queue,
        "priority": spec.priority,
        "actions": doc["actions"],
        "spec": doc,
        "policy": None,  # a declaration takes a policy's table over (store/enrolment.py writes the name)
    }


def _unchanged_since(row: Row[Any]) -> tuple[ColumnElement[bool], ...]:
    """WHERE clauses that match ``row`` only if nobody changed it since it was read."""
    deleted = _T.c.deleted_at.is_(None) if row.deleted_at is None else _T.c.deleted_at == row.deleted_at
    return (
        _T.c.id == row.id,
        _T.c.managed_by == row.managed_by,
        _T.c.updated_at == row.updated_at,
        deleted,
    )


def _iso(value: datetime | None) -> str:
    return value.isoformat() if value is not None else "-"


def _validated(spec: TableSpec) -> TableSpec:
    """``spec`` validated again from its serialized form: what is written must read back.

    A spec can skip validation (``model_construct``, ``model_copy(update=...)``), and a value that
    does not survive its own dump (the old ``-1`` -> ``"-1s"``) would make the row unreadable.
    """
    try:
        return TableSpec.model_validate(spec.model_dump(mode="json", by_alias=True))
    except ValidationError as e:
        raise InvalidDeclaration(format_validation_error(e, f"table {spec.id}")) from None


def _to_registered(row: Row[Any]) -> RegisteredTable:
    try:
        spec = TableSpec.model_validate(row.spec)
    except Exception as e:  # noqa: BLE001 - ValidationError, or a row that is not even a mapping
        why = format_validation_error(e).replace("\n", "; ") if isinstance(e, ValidationError) else str(e)
        raise UnreadableTable(
            row.table_id,
            f"table {row.table_id}: its stored declaration no longer validates (written by an older "
            f"version?): {why}; register it again or remove it",
        ) from None
    return RegisteredTable(
        spec=spec,
        managed_by=Owner(row.managed_by),
        created_at=row.created_at,
        updated_at=row.updated_at,
        deleted_at=row.deleted_at,
        policy=row.policy,
    )


def _not_found_message(conn: Connection, table_id: str, row: Row[Any] | None) -> str:
    if row is not None and row.deleted_at is not None:
        return f"table {table_id} is not registered: it was removed at {row.deleted_at.isoformat()}"
    live = conn.execute(select(_T.c.table_id).where(_T.c.deleted_at.is_(None))).scalars().all()
    close = difflib.get_close_matches(table_id, live, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; {len(live)} table(s) are registered"
    return f"table {table_id} is not registered{hint}"
