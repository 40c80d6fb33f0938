"""Policy operations (list, show, apply, delete) and ``explain``: one table's effective settings with the
source of each, for the CLI and REST alike, through the one validated spec (``core/policies.py``).

``apply`` writes a policy owned by the store (REST, CLI); a policy a declarations file declares is changed
there only (:class:`~airflow_tablemgmt.store.policies.PolicyManagedByCode`, a conflict).

``explain`` resolves a table as it runs (``store/effective.py``): its own declaration (a file's or the store's;
nothing for a table a policy enrolled, whose stored actions are the policies' settings), the store's policies
and the defaults. A table not registered, or enrolled, is matched with its properties read from the catalog
without a JVM (the opt-out and the property matches), as discovery matches it; a declared table is matched
without them, as its DAGs are built (a property-conditioned policy, or the opt-out property, is a note).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from airflow_tablemgmt.core.errors import InvalidDeclaration, TableNotFound
from airflow_tablemgmt.core.formats import known_format
from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.policies import (
    Policy,
    Resolution,
    TableFacts,
    opt_out_reason,
    parse_policy,
    resolve,
)
from airflow_tablemgmt.core.tables import Owner
from airflow_tablemgmt.services.errors import InvalidInput

if TYPE_CHECKING:
    from airflow_tablemgmt.store import Store
    from airflow_tablemgmt.store.policies import StoredPolicy, UpsertResult

log = logging.getLogger(__name__)


def _repo(store: Store) -> Any:
    from airflow_tablemgmt.store.policies import PolicyRepository

    return PolicyRepository.of(store)


def policy_view(stored: StoredPolicy, tables: int | None = None) -> dict[str, Any]:
    """One policy as the CLI and REST show it: the spec as declared, who owns it, how many tables it manages."""
    from airflow_tablemgmt.store.policies import policy_document

    view = policy_document(stored.policy)
    view.update(
        {
            "managed-by": str(stored.managed_by),
            "source": stored.source,
            "specificity": list(stored.policy.match.specificity()),
            "updated-at": stored.updated_at.isoformat(),
        }
    )
    if tables is not None:
        view["tables"] = tables
    return view


def list_policies(store: Store) -> list[dict[str, Any]]:
    repo = _repo(store)
    counts = repo.enrolled_counts()
    return [policy_view(p, counts.get(p.name, 0)) for p in repo.list()]


def show_policy(store: Store, name: str) -> dict[str, Any]:
    repo = _repo(store)
    return policy_view(repo.get(name), repo.enrolled_counts().get(name, 0))


@dataclass(frozen=True)
class ApplyResult:
    name: str
    outcome: UpsertResult


def apply_policy(store: Store, data: Any, source: str = "policy") -> ApplyResult:
    """Create or update one policy from its document (owned by the store)."""
    policy = parse_policy(data, source, named=source != "body")
    return ApplyResult(policy.name, _repo(store).upsert(policy, Owner.STORE))


def read_policy_file(path: str | Path) -> list[Any]:
    """The policy documents of a YAML file: one policy, a list of them, or a declarations-style ``policies:``."""
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise InvalidInput(f"--file: {str(p)!r} cannot be read: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise InvalidInput(f"--file: {str(p)!r} is not valid YAML: {e}") from None
    if isinstance(data, dict) and set(data) == {"policies"}:
        data = data["policies"]
    docs = data if isinstance(data, list) else [data]
    if not docs or not all(isinstance(d, dict) for d in docs):
        raise InvalidInput(
            f"--file: {str(p)!r} holds no policy; expected a policy (name, match, actions), a list of them, "
            "or policies: [...]"
        )
    return docs


def apply_policies(store: Store, docs: list[Any], source: str) -> list[ApplyResult]:
    """Every document validated first; none is written unless all are valid."""
    policies = [parse_policy(d, f"{source}[{i}]" if len(docs) > 1 else source) for i, d in enumerate(docs)]
    names = [p.name for p in policies]
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise InvalidInput(f"{source}: name: {', '.join(twice)} given twice; give each policy once")
    repo = _repo(store)
    return [ApplyResult(p.name, repo.upsert(p, Owner.STORE)) for p in policies]


def delete_policy(store: Store, name: str) -> None:
    _repo(store).delete(name, Owner.STORE)


# --- explain ---------------------------------------------------------------------------------------------


@dataclass
class Explanation:
    """One table's maintenance and where each setting comes from (``to_dict`` is the CLI's and REST's)."""

    table: str
    format: str
    managed_by: str | None
    enrolled_by: str | None
    resolution: Resolution
    matching: list[Policy] = field(default_factory=list)
    properties: Mapping[str, str] | None = None
    notes: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def applied(self) -> bool:
        """Whether the table's DAGs run these settings: a table a policy enrolled runs what discovery wrote
        from this resolution, a declared one its declaration with the policies merged in as shown (matched
        without its properties; its own declaration alone when the merge fails: ``error``); a table not
        registered runs nothing."""
        return self.managed_by is not None

    def to_dict(self) -> dict[str, Any]:
        r = self.resolution
        return {
            "table": self.table,
            "format": self.format,
            "managed-by": self.managed_by,
            "enrolled-by": self.enrolled_by,
            "opted-out": r.opted_out,
            "policies": [
                {"name": p.name, "specificity": list(p.match.specificity()), "applies": p.name in r.policies}
                for p in self.matching
            ],
            "enabled": r.enabled_actions(),
            "actions": {
                action: {key: {"value": s.value, "source": s.source} for key, s in keys.items()}
                for action, keys in r.actions.items()
            },
            "skipped": [{"policy": p, "action": a, "why": why} for p, a, why in r.skipped],
            "properties": dict(self.properties) if self.properties is not None else None,
            "notes": self.notes,
            "error": self.error,
            "applied": self.applied,
        }

    def rows(self) -> list[dict[str, Any]]:
        """One row per (action, setting): the CLI's table."""
        return [
            {"action": action, "setting": key, "value": s.value, "source": s.source}
            for action, keys in self.resolution.actions.items()
            for key, s in keys.items()
        ]


def _read_properties(store: Store, ident: TableIdentifier, fmt: str) -> dict[str, str]:
    """The table's properties from its catalog, without a JVM (as discovery reads them)."""
    from airflow_tablemgmt.hooks.secrets import resolve_catalog_spec
    from airflow_tablemgmt.metadata.discovery import _properties

    return _properties(resolve_catalog_spec(store.catalogs.get(ident.catalog)), ident, fmt)


def explain(
    store: Store,
    table_id: str,
    *,
    format: str | None = None,
    properties: Mapping[str, str] | None = None,
    read_properties: bool = True,
    policies: list[Policy] | None = None,
) -> Explanation:
    """``table_id``'s effective settings, each with its source.

    A registered table is explained as it is declared; a table not registered (yet) needs ``format``, and is
    explained as discovery would enrol it. ``properties``: the table's properties as given (else read from
    the catalog when ``read_properties``; a table whose properties cannot be read is matched without them,
    and the explanation says so)."""
    try:
        ident = TableIdentifier.parse(table_id)
    except InvalidDeclaration as e:
        raise InvalidInput(f"table: {e}") from None
    own: Mapping[str, Mapping[str, Any]] = {}
    maintenance = managed_by = enrolled_by = None
    notes: list[str] = []
    try:
        row = store.tables.get_registered(ident_text := f"{ident.catalog}.{ident.namespace}.{ident.name}")
    except TableNotFound:
        if format is None:
            raise TableNotFound(
                f"table {table_id} is not registered; give its format (--format, ?format=) to see what the "
                "policies would give it"
            ) from None
        fmt = known_format(format)
        notes.append("not registered: explained as discovery would enrol it")
    else:
        fmt = str(row.spec.format)
        managed_by = str(row.managed_by)
        enrolled_by = row.policy
        if row.managed_by == Owner.POLICY:
            notes.append(f"enrolled by policy {enrolled_by}: its settings are the policies', none its own")
        else:
            own, maintenance = row.spec.actions, row.spec.maintenance
    if properties is None and read_properties:
        try:
            properties = _read_properties(store, ident, fmt)
        except Exception as e:  # noqa: BLE001 - explained without them, and said
            notes.append(f"properties not read ({type(e).__name__}: {str(e)[:200]}): matched without them")
    everyone = policies if policies is not None else [p.policy for p in _repo(store).list()]
    declared = managed_by is not None and managed_by != str(Owner.POLICY)
    seen = dict(properties or {})
    matching = [p for p in everyone if p.match.matches(ident.catalog, ident.namespace, ident.name, fmt, seen)]
    matching.sort(key=lambda p: (p.match.specificity(), p.name), reverse=True)
    # A declared table runs as its DAGs are built: matched without its catalog properties (store/effective.py).
    facts = TableFacts(ident.catalog, ident.namespace, ident.name, fmt, {} if declared else seen)
    if declared:
        notes += _declared_notes(matching, seen, maintenance)
    try:
        resolution = resolve(facts, everyone, own, maintenance)
        error = None
    except InvalidDeclaration as e:  # a tie of two policies, or a merge that does not validate
        error = str(e)
        resolution = resolve(facts, [], own, maintenance)
    if error is not None and managed_by is not None:
        notes.append("the policies are not applied to it: its DAGs run its own declaration and the defaults")
    return Explanation(
        ident_text, fmt, managed_by, enrolled_by, resolution, matching, properties, notes, error
    )


def _declared_notes(
    matching: list[Policy], properties: Mapping[str, str], maintenance: str | None
) -> list[str]:
    """What a declared table's catalog properties would change, and do not (docs/policies.md)."""
    notes = [
        f"policy {p.name} matches on table properties ({', '.join(sorted(p.match.properties))}): it applies "
        "to the tables discovery enrols, not to a declared table (its DAGs are built without reading its "
        "catalog)"
        for p in matching
        if p.match.properties
    ]
    reason = opt_out_reason(properties)
    if reason is not None and maintenance is None:
        notes.append(
            f"{reason} keeps discovery from enrolling it; a declared table opts out of the policies with "
            "maintenance: disabled in its declaration"
        )
    return notes
