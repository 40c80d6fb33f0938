"""``PolicyRepository``: the maintenance policies (``tms_policy``), with ownership as for catalogs and tables.

A policy declared in a declarations file is owned by code (``source`` names the file): REST and the CLI may
read it but not change or delete it. A policy applied through REST or the CLI is owned by the store; a file
that declares the same name takes it over (the file is applied on every parse and must win
deterministically), as for tables. Every spec is validated again from its serialized form before it is
written, so nothing invalid reaches the table.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, cast

from sqlalchemy import Engine, Row, Table, delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from airflow_tablemgmt.core.errors import InvalidDeclaration, TableMgmtError
from airflow_tablemgmt.core.policies import Policy, PolicyNotFound, parse_policy
from airflow_tablemgmt.core.tables import Owner
from airflow_tablemgmt.store.clock import utcnow
from airflow_tablemgmt.store.models import PolicyRow, TableRow

if TYPE_CHECKING:
    from airflow_tablemgmt.store.engine import Store

log = logging.getLogger(__name__)

_T = cast(Table, PolicyRow.__table__)
_TABLES = cast(Table, TableRow.__table__)
_RETRIES = 5

UpsertResult = Literal["created", "updated", "unchanged"]


class PolicyManagedByCode(TableMgmtError):
    """The policy is declared in a declarations file; only that file may change or remove it."""

    def __init__(self, name: str, source: str | None) -> None:
        where = source or "a declarations file"
        super().__init__(f"name: policy {name} is declared in {where}; change or remove it there")
        self.name = name
        self.source = source


@dataclass(frozen=True)
class StoredPolicy:
    """A policy as the store holds it: its spec, who may change it, and (code-owned) the file declaring it."""

    policy: Policy
    managed_by: Owner
    source: str | None
    created_at: datetime
    updated_at: datetime

    @property
    def name(self) -> str:
        return self.policy.name


@dataclass(frozen=True)
class UnreadablePolicy:
    """A stored policy that no longer validates (written by an older version), skipped by ``list``."""

    name: str
    message: str


def policy_document(policy: Policy) -> dict[str, Any]:
    """The JSON the row holds (and the API returns): by alias, explicit values kept."""
    return policy.model_dump(mode="json", by_alias=True, exclude_unset=False)


class PolicyRepository:
    """Policies by name. Get it with :meth:`of`, which makes the store's schema ready first."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @classmethod
    def of(cls, store: Store) -> PolicyRepository:
        store._ensure_schema()
        return cls(store.engine)

    def upsert(self, policy: Policy, owner: Owner, source: str | None = None) -> UpsertResult:
        """Create or update ``policy`` for ``owner``; "unchanged" writes nothing.

        A STORE writer on a CODE row raises :class:`PolicyManagedByCode`; a CODE writer takes over a
        store-owned row (logged). ``source``: the declarations file of a CODE writer."""
        owner = Owner(owner)
        doc = policy_document(parse_policy(policy_document(policy), f"policy {policy.name}"))
        source = source if owner == Owner.CODE else None
        for _ in range(_RETRIES):
            with self._engine.connect() as conn:
                row = conn.execute(select(_T).where(_T.c.name == policy.name)).first()
            now = utcnow()
            if row is None:
                try:
                    with self._engine.begin() as conn:
                        conn.execute(
                            insert(_T).values(
                                name=policy.name,
                                spec=doc,
                                managed_by=str(owner),
                                source=source,
                                created_at=now,
                                updated_at=now,
                            )
                        )
                    return "created"
                except IntegrityError:
                    continue  # created concurrently: compare against that row
            if row.managed_by == Owner.CODE and owner != Owner.CODE:
                raise PolicyManagedByCode(policy.name, row.source)
            if row.managed_by == owner and row.spec == doc and row.source == source:
                return "unchanged"
            if row.managed_by != owner:
                log.warning("policy %s: %s takes it over from the store", policy.name, source)
            with self._engine.begin() as conn:
                changed = conn.execute(
                    update(_T)
                    .where(_T.c.name == policy.name, _T.c.updated_at == row.updated_at)
                    .values(spec=doc, managed_by=str(owner), source=source, updated_at=now)
                ).rowcount
            if changed == 1:
                return "updated"
        raise TableMgmtError(f"policy {policy.name}: gave up after {_RETRIES} concurrent modifications")

    def get(self, name: str) -> StoredPolicy:
        """The policy; :class:`PolicyNotFound` naming the known ones; :class:`InvalidDeclaration` if its row
        no longer validates."""
        with self._engine.connect() as conn:
            row = conn.execute(select(_T).where(_T.c.name == name)).first()
            if row is None:
                names = conn.execute(select(_T.c.name).order_by(_T.c.name)).scalars().all()
                raise PolicyNotFound(name, list(names))
        return _to_stored(row)

    def list(self) -> builtins.list[StoredPolicy]:
        """Every policy that loads, by name; one that no longer validates is logged and skipped."""
        policies, errors = self.list_with_errors()
        for err in errors:
            log.warning("%s", err.message)
        return policies

    def list_with_errors(self) -> tuple[builtins.list[StoredPolicy], builtins.list[UnreadablePolicy]]:
        with self._engine.connect() as conn:
            rows = conn.execute(select(_T).order_by(_T.c.name)).all()
        policies: builtins.list[StoredPolicy] = []
        errors: builtins.list[UnreadablePolicy] = []
        for row in rows:
            try:
                policies.append(_to_stored(row))
            except InvalidDeclaration as e:
                errors.append(UnreadablePolicy(row.name, str(e)))
        return policies, errors

    def delete(self, name: str, owner: Owner) -> None:
        """Remove the policy: :class:`PolicyNotFound`, or :class:`PolicyManagedByCode` for a store writer on
        a policy of a declarations file. The tables it enrolled are retired by the next discovery pass."""
        stored = self.get(name)
        if stored.managed_by == Owner.CODE and Owner(owner) != Owner.CODE:
            raise PolicyManagedByCode(name, stored.source)
        with self._engine.begin() as conn:
            conn.execute(delete(_T).where(_T.c.name == name, _T.c.managed_by == stored.managed_by))

    def enrolled_counts(self) -> dict[str, int]:
        """Live tables per enrolling policy (``tms_table.policy``, migration 0010), counted by the database."""
        with self._engine.connect() as conn:
            rows = conn.execute(
                select(_TABLES.c.policy, func.count())
                .where(_TABLES.c.policy.is_not(None), _TABLES.c.deleted_at.is_(None))
                .group_by(_TABLES.c.policy)
            ).all()
        return {str(name): int(n) for name, n in rows}

    def code_policies(self) -> dict[str, str | None]:
        """Code-owned policy name -> the file that declared it (the sync's pruning reads it)."""
        with self._engine.connect() as conn:
            rows = conn.execute(select(_T.c.name, _T.c.source).where(_T.c.managed_by == str(Owner.CODE)))
            return {r.name: r.source for r in rows}

    def remove_code_policies(self, names: Collection[str]) -> builtins.list[str]:
        """Delete the code-owned policies among ``names`` (the sync's pruning); the names removed."""
        if not names:
            return []
        with self._engine.begin() as conn:
            gone = (
                conn.execute(
                    select(_T.c.name).where(_T.c.name.in_(sorted(names)), _T.c.managed_by == str(Owner.CODE))
                )
                .scalars()
                .all()
            )
            conn.execute(delete(_T).where(_T.c.name.in_(gone), _T.c.managed_by == str(Owner.CODE)))
        return sorted(gone)


def _to_stored(row: Row[Any]) -> StoredPolicy:
    try:
        policy = parse_policy(row.spec, f"policy {row.name}")
    except InvalidDeclaration as e:
        why = str(e).replace("\n", "; ")
        raise InvalidDeclaration(
            f"policy {row.name}: its stored spec no longer validates (written by an older version?): {why}; "
            "apply it again or delete it"
        ) from None
    return StoredPolicy(policy, Owner(row.managed_by), row.source, row.created_at, row.updated_at)
