"""Discovery: the tables each policy manages, kept equal to what its catalogs hold (``tablemgmt discover``,
``POST /discovery``, the ``tms__discover__<policy>`` DAGs).

One pass lists every catalog a policy's ``match.catalog`` names, without a JVM (``metadata/discovery.py``),
and for each table found asks the policies (``core/policies.py``: the opt-out, the matching policies, the most
specific one) who manages it:

- a table a policy matches and nobody declared is **enrolled**: a ``tms_table`` row managed by that policy whose
  actions are the policy's effective settings, so its DAGs, processes, leases, health and alerts are those of
  any table; one that was retired and came back is **re-enrolled**; one whose policy's settings changed, or
  that a more specific policy now matches, is **updated**;
- a table its policy enrolled is **retired** (soft-deleted: its row and its process history stay) when it is
  gone from a catalog listed completely, opted out (``tablemgmt.maintenance=disabled``), matched by no policy
  any more, or its policy or catalog was removed.

A table declared in a file or registered through REST or the CLI is never taken over: its declaration wins.
A listing that could not read everything retires nothing from that catalog; a tie between two policies is
reported and changes nothing. Every change is recorded with its time, policy, table and why
(``store/enrolment.py``); ``dry_run`` reports the same changes without writing them.
"""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.errors import InvalidDeclaration
from airflow_tablemgmt.core.policies import Policy, PolicyConflict, TableFacts, opt_out_reason, resolve
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.metadata.discovery import CatalogListing, DiscoveredTable, list_catalog
from airflow_tablemgmt.services.errors import InvalidInput, NotFound
from airflow_tablemgmt.store.enrolment import (
    CHANGES,
    RETIRED,
    EnrolmentRecord,
    EnrolmentRepository,
    TableState,
)

if TYPE_CHECKING:
    from airflow_tablemgmt.store import Store

log = logging.getLogger(__name__)

Lister = Callable[[CatalogSpec], CatalogListing]
Resolver = Callable[[CatalogSpec], CatalogSpec]


@dataclass(frozen=True)
class Change:
    """One change a pass made (or, in a dry run, would make)."""

    table: str
    policy: str
    change: str
    reason: str


@dataclass(frozen=True)
class CatalogReport:
    """What one catalog's listing found."""

    catalog: str
    tables: int
    complete: bool
    failures: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class DiscoveryResult:
    """A pass: the policies it ran for, each catalog it listed, the changes, and what it left alone and why."""

    policies: list[str]
    catalogs: list[CatalogReport]
    changes: list[Change]
    skipped: list[tuple[str, str]]
    dry_run: bool = False
    #: What a person should know of the pass itself (a policy that names no registered catalog).
    notes: list[str] = field(default_factory=list)

    def count(self, change: str) -> int:
        return sum(1 for c in self.changes if c.change == change)

    def to_dict(self) -> dict[str, Any]:
        return {
            "policies": self.policies,
            "dry_run": self.dry_run,
            "counts": {kind: self.count(kind) for kind in CHANGES},
            "catalogs": [asdict(c) for c in self.catalogs],
            "changes": [asdict(c) for c in self.changes],
            "skipped": [{"table": t, "reason": r} for t, r in self.skipped],
            "notes": self.notes,
        }


def load_policies(store: Store) -> list[Policy]:
    """Every stored policy (a row that no longer validates is left out, logged by its repository)."""
    return stored_policies(store)[0]


def stored_policies(store: Store) -> tuple[list[Policy], list[str]]:
    """The stored policies that validate, and the names of those that no longer do (written by an older
    version): their tables are left as they are, never retired for a policy that only cannot be read."""
    from airflow_tablemgmt.store.policies import PolicyRepository

    readable, unreadable = PolicyRepository.of(store).list_with_errors()
    for u in unreadable:
        log.warning("tablemgmt discovery: %s", u.message)
    return [p.policy for p in readable], [u.name for u in unreadable]


def _default_resolver(catalog: CatalogSpec) -> CatalogSpec:
    from airflow_tablemgmt.hooks.secrets import resolve_catalog_spec

    return resolve_catalog_spec(catalog)


def catalogs_of(policy: Policy, catalogs: Sequence[str]) -> list[str]:
    """The registered catalogs ``policy``'s ``match.catalog`` patterns name."""
    return [c for c in catalogs if any(fnmatch.fnmatchcase(c, p) for p in policy.match.catalog)]


def discover(
    store: Store,
    *,
    policy: str | None = None,
    dry_run: bool = False,
    policies: Sequence[Policy] | None = None,
    lister: Lister = list_catalog,
    resolve_catalog: Resolver = _default_resolver,
) -> DiscoveryResult:
    """One discovery pass for every policy, or for ``policy`` alone (the catalogs it names, the tables it wins
    or manages). ``policies``: the policies to decide with (default: the store's); ``lister`` and
    ``resolve_catalog``: how a catalog is listed and its secret references resolved (the defaults: without a
    JVM, through Airflow's connections and variables)."""
    everyone, frozen = (list(policies), []) if policies is not None else stored_policies(store)
    by_name = {p.name: p for p in everyone}
    if policy is not None and policy not in by_name:
        known = ", ".join(sorted(by_name)) or "none"
        raise NotFound(f"policy: {policy!r} is not a policy; policies: {known}")
    targets = [by_name[policy]] if policy is not None else everyone
    registered = {c.name: c for c in store.catalogs.list()}
    wanted = sorted({c for p in targets for c in catalogs_of(p, sorted(registered))})
    notes = [
        f"policy {p.name} names no registered catalog (match.catalog: {', '.join(p.match.catalog)}; "
        f"registered: {', '.join(sorted(registered)) or 'none'})"
        for p in targets
        if not catalogs_of(p, sorted(registered))
    ]
    notes += [
        f"policy {name} cannot be read (see the log): its tables are left as they are" for name in frozen
    ]
    repo = EnrolmentRepository.of(store)
    run = _Pass(repo, everyone, {p.name for p in targets}, dry_run, set(frozen))
    for name in wanted:
        run.catalog(name, _listing(registered[name], lister, resolve_catalog))
    run.orphans(policy, registered)
    return DiscoveryResult(
        sorted(p.name for p in targets), run.reports, run.changes, run.skipped, dry_run, notes
    )


def _listing(catalog: CatalogSpec, lister: Lister, resolve_catalog: Resolver) -> CatalogListing:
    try:
        resolved = resolve_catalog(catalog)
    except Exception as e:  # noqa: BLE001 - a reference that does not resolve here: not listed, nothing retired
        return CatalogListing(catalog.name, failures=(f"catalog {catalog.name}: its properties: {e}",))
    return lister(resolved)


class _Pass:
    """The decisions of one pass, written through the repository (or only reported, in a dry run)."""

    def __init__(
        self,
        repo: EnrolmentRepository,
        policies: list[Policy],
        targets: set[str],
        dry: bool,
        frozen: set[str],
    ) -> None:
        self.repo = repo
        self.frozen = frozen  # policies that cannot be read: their tables stay as they are
        self.policies = policies
        self.targets = targets
        self.dry = dry
        self.reports: list[CatalogReport] = []
        self.changes: list[Change] = []
        self.skipped: list[tuple[str, str]] = []

    def catalog(self, name: str, listing: CatalogListing) -> None:
        self.reports.append(
            CatalogReport(
                name,
                len(listing.tables),
                listing.complete,
                list(listing.failures),
                [f"{u.where}: {u.reason}" for u in listing.unreadable],
            )
        )
        for failure in listing.failures:
            log.warning("tablemgmt discovery: %s", failure)
        states = self.repo.states([t.id for t in listing.tables])
        for table in listing.tables:
            self._table(table, states.get(table.id))
        managed = {s.table_id: s for s in self.repo.managed(catalogs=[name]) if s.policy in self.targets}
        present = listing.present
        for table_id, state in sorted(managed.items()):
            if table_id in present:
                continue
            if listing.complete:
                self._retire(state, f"dropped from catalog {name} (not in its listing)")
            else:
                self.skipped.append((table_id, f"not in catalog {name}'s listing, which is incomplete: kept"))

    def _table(self, table: DiscoveredTable, state: TableState | None) -> None:
        facts = TableFacts(table.catalog, table.namespace, table.name, table.format, table.properties)
        ours = state is not None and state.live and state.managed_by == Owner.POLICY
        if ours and state is not None and state.policy in self.frozen:
            self.skipped.append((table.id, f"its policy {state.policy} cannot be read: left as it is"))
            return
        if state is not None and state.live and not ours:
            if opt_out_reason(table.properties) is None and _matched(facts, self.policies, self.targets):
                self.skipped.append((table.id, f"declared ({state.managed_by}): its declaration wins"))
            return
        try:
            resolution = resolve(facts, self.policies)
        except PolicyConflict as e:
            self.skipped.append((table.id, str(e)))
            return
        except InvalidDeclaration as e:  # the policies' merged settings do not validate for this table
            self.skipped.append((table.id, str(e)))
            return
        winner = resolution.policies[0] if resolution.policies else None
        if winner is None or resolution.opted_out is not None:
            if ours and state is not None and state.policy in self.targets:
                why = (
                    f"opted out: {resolution.opted_out}"
                    if resolution.opted_out
                    else "no policy matches it any more"
                )
                self._retire(state, why)
            elif resolution.opted_out and _matched(facts, self.policies, self.targets):
                self.skipped.append((table.id, f"opted out: {resolution.opted_out}"))
            return
        if winner not in self.targets and not (ours and state is not None and state.policy in self.targets):
            return  # another policy's table: its own pass decides
        spec = _spec_of(table, resolution)
        if spec is None:
            self.skipped.append((table.id, f"policy {winner}: its settings do not make a valid table spec"))
            return
        if ours and self.frozen:  # its settings may be the unreadable policy's too
            self.skipped.append((table.id, f"settings kept while {self._unreadable()}"))
            return
        previous = state.policy if ours and state is not None else None
        reason = _reason(table, winner, state, previous)
        if self.dry:
            change = self.repo.would_enrol(spec, winner)
        else:
            change = self.repo.enrol(spec, winner, reason)
        if change is not None:
            self.changes.append(Change(table.id, winner, change, reason))

    def _retire(self, state: TableState, reason: str) -> None:
        assert state.policy is not None
        if self.frozen:  # "no policy matches it" may be the unreadable policy's doing
            self.skipped.append((state.table_id, f"not retired while {self._unreadable()}: {reason}"))
            return
        if self.dry or self.repo.retire(state.table_id, state.policy, reason):
            self.changes.append(Change(state.table_id, state.policy, RETIRED, reason))

    def _unreadable(self) -> str:
        return f"policy {', '.join(sorted(self.frozen))} cannot be read"

    def orphans(self, policy: str | None, registered: dict[str, CatalogSpec]) -> None:
        """Retire the tables of a policy that no longer exists, or in a catalog no longer registered or no
        longer named by their policy (no listing reaches them)."""
        by_name = {p.name: p for p in self.policies}
        for state in self.repo.managed(policy):
            if state.policy in self.frozen or any(c.table == state.table_id for c in self.changes):
                continue
            owner = by_name.get(state.policy or "")
            catalog = state.table_id.split(".", 1)[0]
            if owner is None:
                self._retire(state, f"policy {state.policy} no longer exists")
            elif catalog not in registered:
                self._retire(state, f"catalog {catalog} is no longer registered")
            elif not catalogs_of(owner, [catalog]):
                self._retire(state, f"policy {owner.name} no longer names catalog {catalog}")


def _matched(facts: TableFacts, policies: list[Policy], targets: set[str]) -> bool:
    """Whether one of this pass's policies matches the table (so leaving it alone is worth a line)."""
    return any(
        p.name in targets
        and p.match.matches(facts.catalog, facts.namespace, facts.name, facts.format, facts.properties)
        for p in policies
    )


def _spec_of(table: DiscoveredTable, resolution: Any) -> TableSpec | None:
    """The enrolled row's spec: the table as listed, with its effective settings as its actions."""
    try:
        return TableSpec(
            catalog=table.catalog,
            namespace=table.namespace,
            name=table.name,
            format=table.format,
            actions={a: resolution.settings(a) for a in resolution.actions},
        )
    except Exception as e:  # noqa: BLE001 - a ValidationError of a combination no source wrote
        log.warning("tablemgmt discovery: table %s: %s", table.id, e)
        return None


def _reason(table: DiscoveredTable, winner: str, state: TableState | None, previous: str | None) -> str:
    where = f"catalog {table.catalog}, {table.format} table"
    if state is None:
        return f"new in {where}; matches policy {winner}"
    if not state.live:
        return f"back in {where}; matches policy {winner}"
    if previous is not None and previous != winner:
        return f"now matched most specifically by policy {winner} (was {previous})"
    return f"policy {winner}'s settings changed"


def enrolment_records(
    store: Store,
    *,
    policy: str | None = None,
    table: str | None = None,
    change: str | None = None,
    limit: int = 100,
) -> list[EnrolmentRecord]:
    """The newest enrolment records first (what discovery changed, when and why)."""
    if change is not None and change not in CHANGES:
        raise InvalidInput(f"change: {change!r} is not a kind of change; allowed: {', '.join(CHANGES)}")
    if not 1 <= limit <= 1000:
        raise InvalidInput(f"limit: {limit} is out of range; allowed: 1 to 1000")
    return EnrolmentRepository.of(store).records(policy=policy, table_id=table, change=change, limit=limit)


__all__ = [
    "Change",
    "CatalogReport",
    "DiscoveryResult",
    "catalogs_of",
    "discover",
    "enrolment_records",
    "load_policies",
]
