"""``DynamicTableRepository``: dynamic tables, stored as ``tms_table`` rows with a ``dynamic`` document.

(Over 400 lines on purpose: one repository, each guarded statement beside the write plan it executes;
splitting the plan from its statements would put one invariant in two files.)

A dynamic table is a registered table like any other (its ``spec`` column holds the maintenance-side
view, ``DynamicTableSpec.table_spec()``, whose one action is ``refresh``), plus the ``dynamic``
column::

    {"definition": <DynamicTableSpec by alias, mode=json>, "state": "CREATING|ACTIVE|SUSPENDED",
     "consecutive_failures": n, "suspended_reason": str | null, "dynamic_options": {...},
     "incremental": <the last refresh's analysis of the query, core.dynamic.incremental.Analysis> | absent,
     "version": n}

The spec and the definition are written in one statement, so a reader never sees one without the
other. Runtime fields (state, failure count, options) change through an UPDATE guarded by the
document's ``version``: concurrent refreshes that each record a failure never lose a count, and a
state change does not touch ``updated_at`` (which the DAG file and the declarations sync key their
caches on: a refresh outcome changes no DAG).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Engine, Row, Table, insert, select, update
from sqlalchemy.exc import IntegrityError

from airflow_tablemgmt.core.errors import TableManagedByCode, TableMgmtError, TableNotFound
from airflow_tablemgmt.core.tables import Owner
from airflow_tablemgmt.store.clock import utcnow
from airflow_tablemgmt.store.errors import DynamicStateChanged, NotADynamicTable
from airflow_tablemgmt.store.models import TableRow
from airflow_tablemgmt.store.tables import (
    _CHUNK,
    UpsertResult,
    _columns_of,
    _not_found_message,
    _unchanged_since,
    _validated,
)

if TYPE_CHECKING:
    from airflow_tablemgmt.core.dynamic import DynamicTableSpec

_T = cast(Table, TableRow.__table__)
_RETRIES = 20

CREATING, ACTIVE, SUSPENDED = "CREATING", "ACTIVE", "SUSPENDED"
STATES = (CREATING, ACTIVE, SUSPENDED)


@dataclass(frozen=True)
class DynamicTable:
    """A dynamic table as the store holds it: its definition and its runtime state."""

    definition: DynamicTableSpec
    state: str
    consecutive_failures: int = 0
    suspended_reason: str | None = None
    dynamic_options: dict[str, Any] = field(default_factory=dict)
    managed_by: Owner = Owner.STORE
    # Whether the query can be maintained incrementally and why, as the last refresh's Spark analysis found
    # (``Analysis.to_dict()``); None until a refresh analysed the current query.
    incremental: dict[str, Any] | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None

    @property
    def id(self) -> str:
        return str(self.definition.id)

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.id,
            "definition": self.definition.model_dump(mode="json", by_alias=True),
            "state": str(self.state),
            "consecutive_failures": self.consecutive_failures,
            "suspended_reason": self.suspended_reason,
            "dynamic_options": dict(self.dynamic_options),
            "incremental": dict(self.incremental) if self.incremental is not None else None,
            "managed_by": str(self.managed_by),
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "updated_at": self.updated_at.isoformat() if self.updated_at else None,
        }


def _spec_class() -> type[DynamicTableSpec]:
    from airflow_tablemgmt.core.dynamic import DynamicTableSpec

    return DynamicTableSpec


def _state(value: str) -> Any:
    """``DynamicState(value)`` (a StrEnum, equal to its string)."""
    from airflow_tablemgmt.core.dynamic import DynamicState

    return DynamicState(value)


def _definition_doc(definition: DynamicTableSpec) -> dict[str, Any]:
    return definition.model_dump(mode="json", by_alias=True)


class DynamicTableRepository:
    """Dynamic tables by ``catalog.namespace.name``; the same ownership rules as :class:`TableRepository`."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    # -- reads ----------------------------------------------------------------------------------
    def get(self, table_id: str) -> DynamicTable:
        """The live dynamic table; :class:`TableNotFound` if absent or removed, :class:`NotADynamicTable`
        for a plain table."""
        with self._engine.connect() as conn:
            row = conn.execute(select(_T).where(_T.c.table_id == table_id)).first()
            if row is None or row.deleted_at is not None:
                message = _not_found_message(conn, table_id, row)
                raise TableNotFound(message.replace("table ", "dynamic table ", 1))
        if row.dynamic is None:
            raise NotADynamicTable(
                f"table {table_id} is a registered table, not a dynamic table; see `tablemgmt show {table_id}`"
            )
        return _to_dynamic(row)

    def find(self, table_id: str) -> DynamicTable | None:
        try:
            return self.get(table_id)
        except (TableNotFound, NotADynamicTable):
            return None

    def list(self) -> builtins.list[DynamicTable]:
        """Live dynamic tables sorted by id."""
        stmt = select(_T).where(_T.c.deleted_at.is_(None), _T.c.dynamic.is_not(None)).order_by(_T.c.table_id)
        with self._engine.connect() as conn:
            rows = conn.execute(stmt).all()
        return [_to_dynamic(r) for r in rows]

    def _live_ids(self) -> set[str]:
        """Ids of the live dynamic tables (a downstream table's upstreams are among them)."""
        stmt = select(_T.c.table_id).where(_T.c.deleted_at.is_(None), _T.c.dynamic.is_not(None))
        with self._engine.connect() as conn:
            return set(conn.execute(stmt).scalars())

    # -- writes ---------------------------------------------------------------------------------
    def upsert(
        self, definition: DynamicTableSpec, owner: Owner = Owner.STORE, *, state: str | None = None
    ) -> UpsertResult:
        """Create the dynamic table or replace its definition (state, failure count and options kept).

        A new (or revived) table starts in ``state`` (default CREATING). A STORE writer on a live
        code-owned table raises :class:`TableManagedByCode`; a live plain table of that id raises
        :class:`NotADynamicTable`.
        """
        owner = Owner(owner)
        definition = _spec_class().model_validate(_definition_doc(definition))
        table_id = definition.id
        for _ in range(_RETRIES):
            columns = _columns_of(_validated(definition.table_spec(self._live_ids())))
            with self._engine.connect() as conn:
                row = conn.execute(select(_T).where(_T.c.table_id == table_id)).first()
            plan = _plan(row, definition, columns, owner, state, utcnow())
            if plan.result == "unchanged":
                return "unchanged"
            try:
                with self._engine.begin() as conn:
                    if plan.insert is not None:
                        conn.execute(insert(_T).values(**plan.insert))
                        return plan.result
                    assert row is not None and plan.update is not None
                    changed = conn.execute(
                        update(_T).where(*_unchanged_since(row)).values(**plan.update)
                    ).rowcount
            except IntegrityError:
                continue
            if changed == 1:
                return plan.result
        raise TableMgmtError(f"dynamic table {table_id}: gave up after {_RETRIES} concurrent modifications")

    def upsert_many(
        self, definitions: Collection[DynamicTableSpec], owner: Owner = Owner.CODE
    ) -> dict[str, UpsertResult]:
        """:meth:`upsert` for each definition (the YAML sync), new tables starting CREATING, in one
        transaction: the live ids and the existing rows are read once (one ``SELECT ... IN`` per chunk),
        new tables are inserted with one batched statement, changed ones updated under :meth:`upsert`'s
        guard. The same refusals as :meth:`upsert`, raised before anything is written. A row another
        writer changed meanwhile (guard missed, or a concurrent insert) falls back to :meth:`upsert`.
        """
        owner = Owner(owner)
        spec_class = _spec_class()
        defs = [spec_class.model_validate(_definition_doc(d)) for d in definitions]
        if not defs:
            return {}
        # Every table of the batch is live once it is written: a downstream table's upstream may be
        # declared in the same file.
        live_ids = self._live_ids() | {d.id for d in defs}
        ids = [d.id for d in defs]
        rows: dict[str, Row[Any]] = {}
        with self._engine.connect() as conn:
            for i in range(0, len(ids), _CHUNK):
                for row in conn.execute(select(_T).where(_T.c.table_id.in_(ids[i : i + _CHUNK]))):
                    rows[row.table_id] = row
        now = utcnow()
        plans = [
            (d, _plan(rows.get(d.id), d, _columns_of(_validated(d.table_spec(live_ids))), owner, None, now))
            for d in defs
        ]
        results: dict[str, UpsertResult] = {}
        retry: builtins.list[DynamicTableSpec] = []
        try:
            with self._engine.begin() as conn:
                inserts = [p.insert for _, p in plans if p.insert is not None]
                for i in range(0, len(inserts), _CHUNK):
                    conn.execute(insert(_T), inserts[i : i + _CHUNK])  # executemany: batched INSERTs
                for d, p in plans:
                    results[d.id] = p.result
                    if p.update is not None:
                        where = _unchanged_since(rows[d.id])
                        if conn.execute(update(_T).where(*where).values(**p.update)).rowcount != 1:
                            retry.append(d)
        except IntegrityError:  # another writer inserted one of the new tables first
            return {d.id: self.upsert(d, owner) for d in defs}
        for d in retry:
            results[d.id] = self.upsert(d, owner)
        return results

    def set_state(
        self,
        table_id: str,
        state: str,
        *,
        expected: Collection[str] | None = None,
        reason: str | None = None,
        dynamic_options: dict[str, Any] | None = None,
        reset_failures: bool = False,
    ) -> DynamicTable:
        """Move the table to ``state`` (only from one of ``expected``, when given; else
        :class:`DynamicStateChanged`). ``reason`` is kept only for SUSPENDED; ``dynamic_options``
        replaces the stored options when given."""
        if state not in STATES:
            raise ValueError(f"state: {state!r}; allowed: {', '.join(STATES)}")

        def change(doc: dict[str, Any]) -> dict[str, Any]:
            if expected is not None and doc.get("state") not in expected:
                raise DynamicStateChanged(table_id, str(doc.get("state")), expected)
            doc["state"] = state
            doc["suspended_reason"] = reason if state == SUSPENDED else None
            if dynamic_options is not None:
                doc["dynamic_options"] = dict(dynamic_options)
            if reset_failures:
                doc["consecutive_failures"] = 0
            return doc

        return self._modify(table_id, change)

    def record_result(
        self, table_id: str, success: bool, scheduled: bool, *, reason: str | None = None
    ) -> DynamicTable:
        """Count a refresh outcome atomically. A success resets the count (and a CREATING table
        becomes ACTIVE); a failed *scheduled* refresh adds one, and reaching the definition's
        ``suspend-after-failures`` suspends the table with the reason recorded. A failed manual
        refresh changes nothing: only the schedule's failures suspend."""

        def change(doc: dict[str, Any]) -> dict[str, Any]:
            if success:
                doc["consecutive_failures"] = 0
                if doc.get("state") == CREATING:
                    doc["state"] = ACTIVE
                return doc
            if not scheduled:
                return doc
            failures = int(doc.get("consecutive_failures", 0)) + 1
            doc["consecutive_failures"] = failures
            limit = int(doc["definition"].get("suspend-after-failures", 5))
            if failures >= limit and doc.get("state") != SUSPENDED:
                doc["state"] = SUSPENDED
                doc["suspended_reason"] = (
                    f"suspended after {failures} consecutive failed scheduled refreshes "
                    f"(suspend-after-failures: {limit}); last error: {(reason or 'unknown')[:500]}"
                )
            return doc

        return self._modify(table_id, change)

    def set_analysis(self, table_id: str, analysis: dict[str, Any]) -> DynamicTable:
        """Record the incremental analysis of the table's current query (a refresh's Spark analysis). A
        runtime field: like the state, it changes no DAG and leaves ``updated_at`` alone."""

        def change(doc: dict[str, Any]) -> dict[str, Any]:
            doc["incremental"] = dict(analysis)
            return doc

        return self._modify(table_id, change)

    def set_options(self, table_id: str, dynamic_options: dict[str, Any]) -> DynamicTable:
        def change(doc: dict[str, Any]) -> dict[str, Any]:
            doc["dynamic_options"] = dict(dynamic_options)
            return doc

        return self._modify(table_id, change)

    def delete(self, table_id: str, owner: Owner = Owner.STORE) -> None:
        """Soft-delete the live dynamic table (its process history stays), on behalf of ``owner``."""
        self.get(table_id)  # a plain table is not removed through this path
        from airflow_tablemgmt.store.tables import TableRepository

        TableRepository(self._engine).remove(table_id, owner)

    # -- internals --------------------------------------------------------------------------------
    def _modify(self, table_id: str, change: Callable[[dict[str, Any]], dict[str, Any]]) -> DynamicTable:
        """Read the live row's document, apply ``change``, write it back guarded by its version."""
        for _ in range(_RETRIES):
            with self._engine.connect() as conn:
                row = conn.execute(
                    select(_T).where(_T.c.table_id == table_id, _T.c.deleted_at.is_(None))
                ).first()
            if row is None or row.dynamic is None:
                self.get(table_id)  # raises the right error
                raise TableNotFound(f"dynamic table {table_id} is not registered")
            current = dict(row.dynamic)
            version = int(current.get("version", 0))
            new_doc = change(dict(current))
            if new_doc == current:
                return _to_dynamic(row)
            new_doc["version"] = version + 1
            guard = _T.c.dynamic["version"].as_integer() == version if version else _version_absent()
            with self._engine.begin() as conn:
                changed = conn.execute(
                    update(_T)
                    .where(_T.c.id == row.id, _T.c.deleted_at.is_(None), guard)
                    .values(dynamic=new_doc)
                ).rowcount
                if changed == 1:
                    fresh = conn.execute(select(_T).where(_T.c.id == row.id)).one()
                    return _to_dynamic(fresh)
        raise TableMgmtError(f"dynamic table {table_id}: gave up after {_RETRIES} concurrent modifications")


def _version_absent() -> Any:
    return _T.c.dynamic["version"].as_integer().is_(None)


@dataclass(frozen=True)
class _Plan:
    """What :meth:`DynamicTableRepository.upsert` writes for one definition: an INSERT, a guarded
    UPDATE, or nothing (``unchanged``)."""

    result: UpsertResult
    insert: dict[str, Any] | None = None
    update: dict[str, Any] | None = None


def _plan(
    row: Row[Any] | None,
    definition: DynamicTableSpec,
    columns: dict[str, Any],
    owner: Owner,
    state: str | None,
    now: datetime,
) -> _Plan:
    """Decide the write for ``definition`` given its current ``row``; raises the upsert's refusals."""
    doc = _definition_doc(definition)
    table_id = definition.id
    fresh = _document(doc, state or CREATING)
    if row is None:
        return _Plan(
            "created",
            insert=dict(
                table_id=table_id,
                managed_by=str(owner),
                created_at=now,
                updated_at=now,
                dynamic=fresh,
                **columns,
            ),
        )
    live = row.deleted_at is None
    if live and row.dynamic is None:
        raise NotADynamicTable(
            f"table {table_id} is registered as a plain table; remove it first "
            f"(`tablemgmt remove {table_id}`) to declare a dynamic table of that name"
        )
    if live and row.managed_by == Owner.CODE and owner == Owner.STORE:
        raise TableManagedByCode(table_id)
    if live:
        current = dict(row.dynamic)
        if row.managed_by == owner and row.spec == columns["spec"] and current.get("definition") == doc:
            if state is None or current.get("state") == state:
                return _Plan("unchanged")
        new_doc = {**current, "definition": doc, "version": int(current.get("version", 0)) + 1}
        if (current.get("definition") or {}).get("query") != doc.get("query"):
            new_doc.pop("incremental", None)  # the analysis was of the old query
        if state is not None:
            new_doc["state"] = state
    else:
        new_doc = fresh
    values = dict(columns, managed_by=str(owner), updated_at=now, deleted_at=None, dynamic=new_doc)
    if not live:
        values["created_at"] = now
    return _Plan("updated" if live else "created", update=values)


def _document(definition: dict[str, Any], state: str) -> dict[str, Any]:
    return {
        "definition": definition,
        "state": state,
        "consecutive_failures": 0,
        "suspended_reason": None,
        "dynamic_options": {},
        "version": 1,
    }


def _to_dynamic(row: Row[Any]) -> DynamicTable:
    from pydantic import ValidationError

    from airflow_tablemgmt.core.errors import UnreadableTable
    from airflow_tablemgmt.core.tables import format_validation_error

    doc = dict(row.dynamic)
    try:
        definition = _spec_class().model_validate(doc["definition"])
    except (ValidationError, KeyError, TypeError) as e:
        why = format_validation_error(e).replace("\n", "; ") if isinstance(e, ValidationError) else str(e)
        raise UnreadableTable(
            row.table_id,
            f"dynamic table {row.table_id}: its stored definition no longer validates: {why}; "
            "declare it again or drop it",
        ) from None
    return DynamicTable(
        definition=definition,
        state=_state(str(doc.get("state", CREATING))),
        consecutive_failures=int(doc.get("consecutive_failures", 0)),
        suspended_reason=doc.get("suspended_reason"),
        dynamic_options=dict(doc.get("dynamic_options") or {}),
        managed_by=Owner(row.managed_by),
        incremental=dict(doc["incremental"]) if isinstance(doc.get("incremental"), dict) else None,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )
