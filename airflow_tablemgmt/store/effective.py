"""What a registered table runs: its declaration with the matching policies merged in (``core/policies.py``).

Every place that decides a run reads a table through here — the DAG file's build (both the full parse and a
task start's single DAG), the maintenance operator, the snapshot gate, the process runner and its health gate —
so a policy reaches a declared table as it reaches the tables it enrolled. Precedence per key: the table's own
declaration > the most specific matching policy > a catalog-wide policy > the defaults.

* A table a policy **enrolled** runs its row as discovery wrote it (already the policies' effective settings,
  kept current by every pass): nothing is merged again.
* A **declared** table (a file's, or registered through REST or the CLI) is matched on what the store knows —
  catalog, namespace, name, format and its declaration's ``maintenance:`` — **not on its catalog properties**:
  a DAG file parses thousands of tables without touching a catalog, and a run must be the DAG that was built.
  So a policy with ``match.properties`` conditions does not apply to a declared table, and the opt-out
  property ``tablemgmt.maintenance=disabled`` does not opt a declared table out: its declaration does
  (``maintenance: disabled``). ``explain`` says so for such a table (docs/policies.md).
* A merge that fails (two policies of equal specificity, a combination of keys no action accepts) leaves the
  table on its own declaration; the DAG file reports it as a declaration error naming the table, a worker
  logs it.

:class:`PolicyMerge` matches once per table and resolves once per distinct (format, own actions,
``maintenance``, matching policies): at 10,000 tables a parse resolves a handful of combinations, not 10,000.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import logging
import re
from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.errors import InvalidDeclaration
from airflow_tablemgmt.core.policies import OPT_OUT_VALUE, Policy, effective_spec
from airflow_tablemgmt.core.tables import Owner, TableSpec

if TYPE_CHECKING:
    from airflow_tablemgmt.store.engine import Store
    from airflow_tablemgmt.store.tables import RegisteredTable

log = logging.getLogger(__name__)


def _matcher(patterns: Sequence[str]) -> re.Pattern[str] | None:
    """One compiled regex for a list of globs; None when one of them matches everything."""
    if "*" in patterns:
        return None
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns))


class PolicyMerge:
    """The stored policies, merged into declared tables (see the module docstring)."""

    def __init__(self, policies: Sequence[Policy]) -> None:
        # Policies with property conditions never match a declared table (its properties are not read).
        self.policies = [p for p in policies if not p.match.properties]
        self._digest = {
            p.name: hashlib.sha256(p.model_dump_json(by_alias=True).encode()).hexdigest()[:16]
            for p in self.policies
        }
        self._compiled = [
            (p, _matcher(p.match.catalog), _matcher(p.match.namespace), _matcher(p.match.name))
            for p in self.policies
        ]
        self._by_place: dict[tuple[str, str, str], list[tuple[Policy, re.Pattern[str] | None]]] = {}
        self._memo: dict[tuple[str, ...], dict[str, dict[str, Any]]] = {}

    @classmethod
    def load(cls, store: Store) -> PolicyMerge:
        """The store's policies (none when they cannot be read: tables run their own declarations)."""
        from airflow_tablemgmt.store.policies import PolicyRepository

        try:
            return cls([p.policy for p in PolicyRepository.of(store).list()])
        except Exception as e:  # noqa: BLE001 - a store without the policies' schema yet
            log.warning("tablemgmt: the policies could not be read; tables run their own declarations: %s", e)
            return cls([])

    def __bool__(self) -> bool:
        return bool(self.policies)

    def matching(self, spec: TableSpec) -> list[Policy]:
        """The policies that match ``spec`` (unordered); none for a table whose declaration opts out."""
        if not self.policies or spec.maintenance == OPT_OUT_VALUE:
            return []
        place = (spec.catalog, spec.namespace, str(spec.format))
        candidates = self._by_place.get(place)
        if candidates is None:
            candidates = self._by_place[place] = [
                (p, name)
                for p, catalog, namespace, name in self._compiled
                if (catalog is None or catalog.match(spec.catalog))
                and (namespace is None or namespace.match(spec.namespace))
                and (p.match.format is None or place[2] in p.match.format)
            ]
        return [p for p, name in candidates if name is None or name.match(spec.name)]

    def key(self, spec: TableSpec) -> str:
        """What the policies contribute to ``spec``'s DAGs, as a digest part: "" when none matches; else the
        matching policies' names and content, so a policy's change rebuilds exactly the tables it matches."""
        return ",".join(sorted(f"{p.name}:{self._digest[p.name]}" for p in self.matching(spec)))

    def apply(self, spec: TableSpec) -> TableSpec:
        """``spec`` with the matching policies merged in (``spec`` itself when none matches).
        Raises :class:`InvalidDeclaration` as :func:`~airflow_tablemgmt.core.policies.resolve` does."""
        matched = self.matching(spec)
        if not matched:
            return spec
        memo_key = (
            str(spec.format),
            spec.maintenance or "",
            json.dumps(spec.actions, sort_keys=True, default=str),
            *sorted(p.name for p in matched),
        )
        actions = self._memo.get(memo_key)
        if actions is None:
            merged = effective_spec(spec, matched)  # raises on a tie or an invalid merge: never memoized
            actions = self._memo[memo_key] = merged.actions
            return merged
        return spec.model_copy(update={"actions": actions})

    def apply_or_own(self, spec: TableSpec) -> tuple[TableSpec, str | None]:
        """:meth:`apply`, or ``spec`` itself and the error that made the merge fail."""
        try:
            return self.apply(spec), None
        except InvalidDeclaration as e:
            return spec, f"{e} (the policies are not applied to it: it runs its own declaration)"

    def apply_all(
        self, specs: Iterable[TableSpec], leave: Collection[str] = ()
    ) -> tuple[list[TableSpec], dict[str, str]]:
        """:meth:`apply_or_own` for each spec but those in ``leave`` (enrolled, or not to be built), and the
        error of each table whose merge failed, by id."""
        out: list[TableSpec] = []
        errors: dict[str, str] = {}
        for spec in specs:
            if spec.id in leave:
                out.append(spec)
                continue
            merged, error = self.apply_or_own(spec)
            if error is not None:
                errors[spec.id] = error
            out.append(merged)
        return out, errors


def effective_of(registered: RegisteredTable, merge: PolicyMerge) -> TableSpec:
    """What ``registered`` runs: an enrolled row as stored, a declared one with ``merge``'s policies merged in
    (its own declaration when the merge fails, logged)."""
    if registered.managed_by == Owner.POLICY:
        return registered.spec
    spec, error = merge.apply_or_own(registered.spec)
    if error is not None:
        log.warning("tablemgmt: table %s: %s", registered.spec.id, error)
    return spec


def effective_table(store: Store, table_id: str) -> TableSpec:
    """The live table ``table_id`` as it runs (see the module docstring); :class:`TableNotFound` as
    ``store.tables.get``. One row and the policies read."""
    registered = store.tables.get_registered(table_id)
    if registered.managed_by == Owner.POLICY:
        return registered.spec
    return effective_of(registered, PolicyMerge.load(store))
