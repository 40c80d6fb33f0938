"""Policies: maintenance for every table that matches, not only the tables declared one by one.

A :class:`Policy` matches tables by catalog, namespace and name patterns (globs), format(s) and table
properties, and carries an ``actions:`` block of exactly the shape of a table's (``core/tables.py``
``TableSpec.actions``: each action's :class:`~airflow_tablemgmt.core.action_model.ActionSettings`, its
options and ``thresholds``). :func:`resolve` gives one table's effective settings and, per key, where each
came from. Everything here is pure: the store, YAML, the CLI and REST all validate through :func:`parse_policy`.

Precedence, per action and per key (``thresholds`` per threshold name):
  1. the table's own declaration (``table``);
  2. the matching policies, most specific first (``policy:<name>``);
  3. the action's defaults (``default``).
A catalog-wide policy needs no rule of its own: it is the least specific policy that names a catalog.

**Specificity** is a tuple compared left to right (a higher value wins at the first difference):
``(name, namespace, catalog, properties, format)``. Each pattern scores 2 when it is exact (no ``*``,
``?`` or ``[``), 1 when it is a glob, 0 when it matches everything (``*``, or absent); a list of patterns
scores its lowest member. ``properties`` counts the property conditions; ``format`` is 1 when the policy
names its formats. So a policy naming tables (``name: orders_*``) beats one naming a namespace, which beats
one naming only a catalog, which beats one that matches every catalog. Two matching policies of the same
specificity are an error naming both (:class:`PolicyConflict`): which one wins is never decided silently.

**Opt-out**: a table whose property ``tablemgmt.maintenance`` is ``disabled`` (read from the catalog) or
whose declaration says ``maintenance: disabled`` gets nothing from any policy.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from pydantic import Field, ValidationError, ValidationInfo, field_validator

from airflow_tablemgmt.core.actions import ACTIONS, PLAIN_TABLE, REFRESH_ON_PLAIN_TABLE
from airflow_tablemgmt.core.durations import Duration
from airflow_tablemgmt.core.errors import InvalidDeclaration, TableMgmtError
from airflow_tablemgmt.core.formats import FORMATS
from airflow_tablemgmt.core.policy_match import PolicyMatch, SpecModel
from airflow_tablemgmt.core.tables import REFRESH_ACTION, TableSpec, _nested, format_validation_error

#: The table property that opts a table out of every policy, and its value.
OPT_OUT_PROPERTY = "tablemgmt.maintenance"
OPT_OUT_VALUE = "disabled"
#: How often discovery lists a policy's catalogs when the policy does not say.
DEFAULT_DISCOVERY_INTERVAL = timedelta(hours=1)
#: Where a setting came from (``policy:<name>`` for a policy's).
SOURCE_TABLE = "table"
SOURCE_DEFAULT = "default"
#: The nested key merged per entry (``thresholds.<name>``), not as one value.
NESTED_KEYS = ("thresholds",)

_POLICY_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
POLICY_NAME_RULE = "lowercase letters, digits, '-' and '_', starting with a letter or digit, at most 63 chars"


def policy_source(name: str) -> str:
    return f"policy:{name}"


class Policy(SpecModel):
    """A named policy: the tables it matches, the actions it gives them, how often discovery looks."""

    name: str
    description: str = Field(default="", max_length=1000)
    match: PolicyMatch = Field(default_factory=PolicyMatch)
    actions: dict[str, dict[str, Any]] = Field(default_factory=dict)
    discovery_interval: Duration = Field(
        default=DEFAULT_DISCOVERY_INTERVAL,
        description="how often discovery lists the matched catalogs: a new table is enrolled within one interval",
    )

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not isinstance(v, str) or not _POLICY_NAME.fullmatch(v):
            raise ValueError(f"name: {v!r} is not a valid policy name ({POLICY_NAME_RULE})")
        return v

    @field_validator("actions", mode="before")
    @classmethod
    def _actions_shape(cls, v: Any) -> Any:
        if isinstance(v, dict):  # ``compact:`` with nothing under it enables the action with its defaults
            return {k: ({} if raw is None else raw) for k, raw in v.items()}
        return v

    @field_validator("actions")
    @classmethod
    def _actions(cls, v: dict[str, dict[str, Any]], info: ValidationInfo) -> dict[str, dict[str, Any]]:
        match = info.data.get("match")
        if match is None:  # the match failed validation: its error is reported, the actions' would guess
            return v
        return validate_policy_actions(v, match.format)

    def formats_for(self, action: str) -> list[str]:
        """The formats whose tables this policy can give ``action``."""
        names = self.match.format or [f.name for f in FORMATS.all()]
        return [n for n in names if FORMATS.unsupported_action("", n, action) is None]


def validate_policy_actions(
    actions: dict[str, dict[str, Any]], formats: list[str] | None
) -> dict[str, dict[str, Any]]:
    """Each action's block validated by that action's model for every format it may reach; returned with the
    keys as written (kebab-case), explicit values kept even when they equal the default."""
    out: dict[str, dict[str, Any]] = {}
    candidates = formats or [f.name for f in FORMATS.all()]
    for name, raw in actions.items():
        if name == REFRESH_ACTION:
            raise ValueError(f"{name}\t{REFRESH_ON_PLAIN_TABLE.partition(': ')[2]}")
        if name not in ACTIONS:
            raise ValueError(
                f"{name}\tunknown action {name!r}; known actions: {', '.join(ACTIONS.all_names())}"
            )
        if not isinstance(raw, dict):
            raise ValueError(f"{name}\texpected a mapping of options, got {raw!r}")
        reach = [f for f in candidates if FORMATS.unsupported_action("", f, name) is None]
        if not reach:
            allowed = ", ".join(sorted(a for f in candidates for a in FORMATS.supported(f)))
            raise ValueError(
                f"{name}\tno format this policy matches ({', '.join(candidates)}) supports it; "
                f"allowed: {allowed}"
            )
        dumped: dict[str, Any] | None = None
        for fmt in reach:
            try:
                settings = ACTIONS.get(name, fmt).settings(raw)
            except ValidationError as e:
                where = (
                    f" (for {fmt} tables; narrow match.format to the formats it is meant for)"
                    if len(reach) > 1
                    else ""
                )
                lines = [f"{line}{where}" for line in _nested(name, e)]
                raise ValueError("\n".join(lines)) from None
            if dumped is None:
                dumped = settings.model_dump(mode="json", by_alias=True, exclude_unset=True)
        out[name] = dumped or {}
    return out


class PolicyConflict(InvalidDeclaration):
    """Two matching policies of equal specificity: which one wins would be a guess."""

    def __init__(self, table: str, first: str, second: str, specificity: tuple[int, ...]) -> None:
        super().__init__(
            f"table {table}: policies {first!r} and {second!r} both match it with the same specificity "
            f"{specificity} (name, namespace, catalog, properties, format); make one of them more specific "
            f"(a narrower pattern, a property condition or a format)"
        )
        self.table = table
        self.policies = (first, second)


class PolicyNotFound(TableMgmtError):
    """No policy of that name."""

    def __init__(self, name: str, known: Sequence[str]) -> None:
        super().__init__(f"name: policy {name!r} does not exist; policies: {', '.join(known) or 'none'}")
        self.name = name


def parse_policy(data: Any, source: str = "policy", *, named: bool = True) -> Policy:
    """A policy from YAML, REST or the CLI; :class:`InvalidDeclaration` with one line per problem, each
    naming the field path, the value and what is allowed (and the policy, unless ``named`` is False: a
    REST body's errors start with the path inside it)."""
    if not isinstance(data, dict):
        raise InvalidDeclaration(f"{source}: expected a mapping with name, match and actions, got {data!r}")
    try:
        return Policy.model_validate(data)
    except ValidationError as e:
        label = f"policy {data.get('name')}" if named and isinstance(data.get("name"), str) else ""
        raise InvalidDeclaration(format_validation_error(e, source, label=label)) from None


# --- resolution --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableFacts:
    """What matching needs to know about one table (from its declaration, its row, or the catalog)."""

    catalog: str
    namespace: str
    name: str
    format: str
    properties: Mapping[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.catalog}.{self.namespace}.{self.name}"


@dataclass(frozen=True)
class Setting:
    value: Any
    source: str


@dataclass(frozen=True)
class Resolution:
    """One table's effective maintenance. ``actions``: action -> key -> :class:`Setting` (every key of the
    action's settings, defaults included; ``thresholds.<name>`` per threshold). ``opted_out``: why no policy
    applies (None when policies apply). ``policies``: the matching policies, most specific first.
    ``skipped``: ``(policy, action, why)`` for a policy's action the table's format does not support."""

    table: str
    actions: dict[str, dict[str, Setting]]
    policies: tuple[str, ...] = ()
    opted_out: str | None = None
    skipped: tuple[tuple[str, str, str], ...] = ()

    def settings(self, action: str) -> dict[str, Any]:
        """One action's effective settings as an ``actions:`` block (kebab-case, nested thresholds)."""
        out: dict[str, Any] = {}
        for key, setting in self.actions[action].items():
            head, dot, tail = key.partition(".")
            if dot and head in NESTED_KEYS:
                out.setdefault(head, {})[tail] = setting.value
            else:
                out[key] = setting.value
        return out

    def enabled_actions(self) -> list[str]:
        return sorted(a for a, keys in self.actions.items() if keys["enabled"].value)

    def action_sources(self, action: str) -> set[str]:
        return {s.source for s in self.actions[action].values()}


def opt_out_reason(properties: Mapping[str, str], maintenance: str | None = None) -> str | None:
    """Why a table is out of every policy, or None."""
    if maintenance == OPT_OUT_VALUE:
        return "its declaration says maintenance: disabled"
    if str(properties.get(OPT_OUT_PROPERTY, "")).strip().lower() == OPT_OUT_VALUE:
        return f"its table property {OPT_OUT_PROPERTY}={OPT_OUT_VALUE}"
    return None


def matching_policies(table: TableFacts, policies: Sequence[Policy]) -> list[Policy]:
    """The policies matching ``table``, most specific first; :class:`PolicyConflict` on a tie."""
    found = [
        p
        for p in policies
        if p.match.matches(table.catalog, table.namespace, table.name, table.format, table.properties)
    ]
    found.sort(key=lambda p: (p.match.specificity(), p.name), reverse=True)
    for a, b in zip(found, found[1:], strict=False):
        if a.match.specificity() == b.match.specificity():
            first, second = sorted((a.name, b.name))
            raise PolicyConflict(table.id, first, second, a.match.specificity())
    return found


def _flatten(block: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in block.items():
        if key in NESTED_KEYS and isinstance(value, Mapping):
            out.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            out[key] = value
    return out


def resolve(
    table: TableFacts,
    policies: Sequence[Policy],
    own_actions: Mapping[str, Mapping[str, Any]] | None = None,
    maintenance: str | None = None,
) -> Resolution:
    """``table``'s effective settings per action and the source of each key (see the module docstring).

    ``own_actions`` is the table's own ``actions:`` block (its declaration's; empty for a table a policy
    enrolled). An action the table names is enabled by the table unless it says ``enabled: false``.
    The merged block of each action is validated again by the action's model: a combination no single
    source wrote (a policy's ``older-than`` under another's floor override) is refused naming the sources."""
    own = {name: dict(raw or {}) for name, raw in (own_actions or {}).items()}
    reason = opt_out_reason(table.properties, maintenance)
    matched = [] if reason is not None else matching_policies(table, policies)
    layers: list[tuple[str, Mapping[str, Mapping[str, Any]]]] = [(SOURCE_TABLE, own)]
    layers += [(policy_source(p.name), p.actions) for p in matched]
    skipped: list[tuple[str, str, str]] = []
    names: list[str] = list(own)
    for policy in matched:
        for action in policy.actions:
            problem = FORMATS.unsupported_action(table.id, table.format, action)
            if problem is not None:
                skipped.append((policy.name, action, problem))
            elif action not in names:
                names.append(action)
    result: dict[str, dict[str, Setting]] = {}
    for action in sorted(names):
        model = ACTIONS.get(action, table.format)
        defaults = _flatten(model.settings({}).model_dump(mode="json", by_alias=True))
        flat = [(source, _flatten(block[action])) for source, block in layers if action in block]
        keys = list(defaults) + [k for _, f in flat for k in f if k not in defaults]
        merged: dict[str, Setting] = {}
        for key in dict.fromkeys(keys):
            hit = next(((s, f[key]) for s, f in flat if key in f), None)
            if key == "enabled" and flat:  # the first source naming the action decides; naming it enables it
                hit = (flat[0][0], flat[0][1].get("enabled", True))
            merged[key] = (
                Setting(hit[1], hit[0]) if hit is not None else Setting(defaults[key], SOURCE_DEFAULT)
            )
        result[action] = merged
    resolution = Resolution(table.id, result, tuple(p.name for p in matched), reason, tuple(skipped))
    for action in result:
        try:
            ACTIONS.get(action, table.format).settings(resolution.settings(action))
        except ValidationError as e:
            sources = ", ".join(sorted(resolution.action_sources(action) - {SOURCE_DEFAULT}))
            lines = [line.replace("\t", ": ") for line in _nested(action, e)]
            raise InvalidDeclaration(
                f"table {table.id}: the effective settings of {action} (from {sources}) are invalid: "
                + "; ".join(lines)
            ) from None
    return resolution


def effective_spec(
    spec: TableSpec, policies: Sequence[Policy], properties: Mapping[str, str] | None = None
) -> TableSpec:
    """``spec`` with its actions replaced by their effective settings under ``policies`` (its own keys first,
    then the matching policies', most specific first): what a declared table would run with the policies merged
    in. ``spec`` itself when no policy contributes. Raises as :func:`resolve` does."""
    facts = TableFacts(spec.catalog, spec.namespace, spec.name, str(spec.format), dict(properties or {}))
    resolution = resolve(facts, policies, spec.actions, spec.maintenance)
    if not resolution.policies:
        return spec
    data = spec.model_dump(mode="json", by_alias=True)
    data["actions"] = {action: resolution.settings(action) for action in resolution.actions}
    return TableSpec.model_validate(data, context=PLAIN_TABLE)
