"""``policies:`` in declarations files: parsed entry by entry through the one validated spec
(``core/policies.py``), declared once across the set, and synced and pruned by :func:`declarations.sync.sync`,
the one path every writer takes (the rules below are that module's, applied to policies).

* Each entry is validated on its own: a bad one is an error of its file naming ``policies[<i>]``, the field,
  the value and what is allowed; the others load. A policy declared in two files is an error of the later one.
* A policy a file declares is owned by code, with the file as its ``source``: REST and the CLI refuse to
  change it; the file takes over a policy of the same name applied through REST or the CLI.
* **Pruning** (deleting a code-owned policy a file no longer declares) needs the same positive evidence as
  for tables: nothing is pruned when the sync is not pruning, when a write of this sync failed, or when a file
  of the set has an error of the whole file; a file prunes only if it parsed without any error and declares
  ``policies:`` explicitly with at least one entry (``policies: []`` prunes only under
  ``tablemgmt apply --prune``); it prunes only the policies whose source is that file; a policy still declared
  by any file parsed in this sync is never pruned.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from airflow_tablemgmt.core.errors import InvalidDeclaration
from airflow_tablemgmt.core.policies import Policy
from airflow_tablemgmt.core.tables import Owner, format_validation_error, short_repr
from airflow_tablemgmt.declarations.errors import DeclarationError, file_error, short_message

if TYPE_CHECKING:
    from airflow_tablemgmt.declarations.model import FileSet, LoadedDeclarations
    from airflow_tablemgmt.store import Store

log = logging.getLogger(__name__)


def same_file(a: str, b: str) -> bool:
    """Two spellings of one file (``declarations.files.same_file``, which imports the parser, as this does)."""
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return a == b


def policy_label(name: Any) -> str:
    """How an entry's errors name it (``DeclarationError.table``)."""
    return f"policy {name}"


def parse_policies(out: LoadedDeclarations, raw: Any) -> None:
    """Validate the ``policies:`` entries of one document into ``out.policies`` (never raises)."""
    source = out.source
    if raw is None:
        return
    if not isinstance(raw, list):
        out.errors.append(
            file_error(source, f"policies: expected a list of policies, got {type(raw).__name__}")
        )
        return
    out.declares_policies = True
    for i, entry in enumerate(raw):
        name = entry.get("name") if isinstance(entry, dict) else None
        label = policy_label(name if isinstance(name, str) else f"policies[{i}]")
        try:
            if not isinstance(entry, dict):
                raise InvalidDeclaration(
                    f"{source}: policies[{i}]: expected a mapping with name, match and actions, got {short_repr(entry)}"
                )
            policy = Policy.model_validate(entry)
        except ValidationError as e:
            msg = format_validation_error(e, source, path_prefix=f"policies[{i}]", label=label)
            out.errors.append(DeclarationError(source, label, msg))
            continue
        except InvalidDeclaration as e:
            out.errors.append(DeclarationError(source, label, str(e)))
            continue
        except Exception as e:  # noqa: BLE001 - one bad entry is that entry's error
            msg = f"{source}: policies[{i}] ({label}): {type(e).__name__}: {short_message(e)}"
            out.errors.append(DeclarationError(source, label, msg))
            continue
        if any(p.name == policy.name for p in out.policies):
            out.errors.append(
                DeclarationError(source, label, f"{source}: policies[{i}] ({label}): declared twice")
            )
            continue
        out.policies.append(policy)


def check_policies_across_files(files: list[LoadedDeclarations]) -> None:
    """Each policy declared once across the set: a later file's repeat is an error of that file."""
    declared_at: dict[str, str] = {}
    for f in files:
        kept = []
        for p in f.policies:
            if p.name in declared_at:
                f.errors.append(
                    DeclarationError(
                        f.source,
                        policy_label(p.name),
                        f"{f.source}: policy {p.name}: declared twice, also in {declared_at[p.name]}; "
                        "declare each policy in one file",
                    )
                )
                continue
            declared_at[p.name] = f.source
            kept.append(p)
        f.policies = kept


def sync_policies(store: Store, fs: FileSet, report: Any, failed: set[str], strict: bool) -> None:
    """Upsert the policies of the files loaded from YAML, owned by code with their file as source. A policy
    another existing file declares (by the store's record of it) is refused naming that file."""
    from airflow_tablemgmt.store.policies import PolicyRepository

    parsed = [f for f in fs.files if f.source in fs.parsed and f.policies]
    if not parsed:
        return
    repo = PolicyRepository.of(store)
    owners = repo.code_policies()
    for f in parsed:
        for policy in f.policies:
            other = owners.get(policy.name)
            try:
                if other and not same_file(other, f.source) and os.path.exists(other):
                    raise InvalidDeclaration(
                        f"{f.source}: policy {policy.name}: declared twice, also in {other}; "
                        "declare each policy in one file"
                    )
                outcome = repo.upsert(policy, Owner.CODE, f.source)
            except Exception as e:  # noqa: BLE001 - lenient: the policy is left out, its file unrecorded
                if strict:
                    raise
                failed.add(f.source)
                report.errors.append(str(e) if str(e).startswith(f.source) else f"policy {policy.name}: {e}")
                continue
            if outcome != "unchanged":
                report.policies.append(f"{policy.name} {outcome}")


def prune_policies(store: Store, fs: FileSet, prune: Any, errors: list[str]) -> list[str]:
    """Delete the code-owned policies the files parsed in this sync no longer declare (module docstring)."""
    from airflow_tablemgmt.store.policies import PolicyRepository

    if not prune.enabled or errors or any(e.table == "<file>" for f in fs.files for e in f.errors):
        return []
    pruning = [
        f
        for f in fs.files
        if f.source in fs.parsed
        and not f.errors
        and f.declares_policies
        and (f.policies or prune.allow_empty)
    ]
    if not pruning:
        return []
    declared = {p.name for f in fs.files for p in f.policies}
    declared |= {
        e.table.removeprefix("policy ") for f in fs.files for e in f.errors if e.table.startswith("policy ")
    }
    repo = PolicyRepository.of(store)
    doomed = {
        name
        for name, source in repo.code_policies().items()
        if name not in declared and source is not None and any(same_file(source, f.source) for f in pruning)
    }
    removed = repo.remove_code_policies(doomed)
    if removed:
        log.info("tablemgmt: removed the policies no longer declared: %s", ", ".join(removed))
    return removed
