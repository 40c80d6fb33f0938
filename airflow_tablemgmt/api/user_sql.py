"""Who may define user SQL: the ``[tablemgmt] user_sql_authors`` rule.

A dynamic table's query runs on a worker with the credentials of every catalog the job registers, so
writing one is closer to deploying code than to editing a DAG: Airflow's DAG edit permission (which the
``user`` role holds) is not enough. Creating a dynamic table, altering one, and refreshing or resuming
one *with options* (``dynamicOptions``, ``dynamic_options``: Spark session settings for its refreshes)
also need a match of this rule; a refresh without options runs the reviewed query and needs only the
refresh DAG's run permission.

The rule is a comma-separated list; a user matching any entry may define user SQL:

- ``role:<name>``: the user's role in the auth manager (the simple auth manager's ``admin``, ``op``,
  ``user``, ``viewer``; a FAB role's name), compared without case;
- ``user:<name>``: that user name;
- ``permission:<resource>:<method>``: the auth manager's own answer for that permission, for auth
  managers whose users carry no role (Keycloak...): ``resource`` is ``connection``, ``variable``,
  ``configuration`` or ``pool``, ``method`` ``GET``, ``POST``, ``PUT`` or ``DELETE``
  (``permission:connection:PUT``: whoever may edit connections, who can read the catalogs'
  credentials anyway);
- ``*``: anyone with the DAG permission (the rule switched off; not for shared deployments).

Default ``role:admin``. A value that parses to nothing usable refuses everyone (an error in the rule
never opens it). YAML declarations and the CLI are not checked here: tables.yaml is code, reviewed
like the DAGs beside it, and the CLI runs with its user's own access to the store (docs/security.md).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from airflow_tablemgmt.api.errors import ApiError

log = logging.getLogger(__name__)

OPTION = "user_sql_authors"
DEFAULT = "role:admin"
RESOURCES = ("connection", "variable", "configuration", "pool")
METHODS = ("GET", "POST", "PUT", "DELETE")


class RuleError(ValueError):
    """``[tablemgmt] user_sql_authors`` has an entry this module cannot read."""


@dataclass(frozen=True)
class AuthorRule:
    """The parsed rule; :meth:`allows` asks it about one user."""

    text: str
    roles: frozenset[str] = frozenset()
    users: frozenset[str] = frozenset()
    permissions: tuple[tuple[str, str], ...] = ()
    anyone: bool = False

    @classmethod
    def parse(cls, text: str) -> AuthorRule:
        roles: set[str] = set()
        users: set[str] = set()
        permissions: list[tuple[str, str]] = []
        anyone = False
        for raw in text.split(","):
            entry = raw.strip()
            if not entry:
                continue
            kind, _, value = entry.partition(":")
            kind, value = kind.strip().lower(), value.strip()
            if entry == "*":
                anyone = True
            elif kind == "role" and value:
                roles.add(value.lower())
            elif kind == "user" and value:
                users.add(value)
            elif kind == "permission" and value:
                resource, _, method = value.partition(":")
                resource, method = resource.strip().lower(), method.strip().upper()
                if resource not in RESOURCES or method not in METHODS:
                    raise RuleError(
                        f"[tablemgmt] {OPTION}: {entry!r} is not a permission; allowed: "
                        f"permission:<{'|'.join(RESOURCES)}>:<{'|'.join(METHODS)}>"
                    )
                permissions.append((resource, method))
            else:
                raise RuleError(
                    f"[tablemgmt] {OPTION}: {entry!r} is not an entry; allowed: role:<name>, user:<name>, "
                    "permission:<resource>:<method> or *, separated by commas"
                )
        return cls(text.strip(), frozenset(roles), frozenset(users), tuple(permissions), anyone)

    def allows(self, user: Any, is_authorized: Any = None) -> bool:
        """``is_authorized(resource, method, user) -> bool``: the auth manager, for permission entries."""
        if self.anyone:
            return True
        if self.users and user_name(user) in self.users:
            return True
        if self.roles and self.roles & user_roles(user):
            return True
        if self.permissions and is_authorized is not None:
            return any(is_authorized(resource, method, user) for resource, method in self.permissions)
        return False


def user_name(user: Any) -> str:
    get_name = getattr(user, "get_name", None)
    return str(get_name()) if callable(get_name) else str(getattr(user, "username", "") or "")


def user_roles(user: Any) -> frozenset[str]:
    """The user's role names, lower-cased: the simple auth manager's ``role``, FAB's ``roles``."""
    found: set[str] = set()
    role = getattr(user, "role", None)
    if isinstance(role, str) and role:
        found.add(role.lower())
    for r in getattr(user, "roles", None) or ():
        name = r if isinstance(r, str) else getattr(r, "name", None)
        if isinstance(name, str) and name:
            found.add(name.lower())
    return frozenset(found)


def configured_rule() -> AuthorRule:
    """The rule as configured now (read on each request: a changed setting applies at once). An
    unreadable value refuses everyone and is logged, so a typo never opens the rule."""
    from airflow.configuration import conf

    text = conf.get("tablemgmt", "user_sql_authors", fallback=DEFAULT)
    try:
        return AuthorRule.parse(text if text is not None else DEFAULT)
    except RuleError as e:
        log.error("%s; nobody may define user SQL until it is fixed", e)
        return AuthorRule(f"{text} (unreadable: {e})")


def _auth_manager_says(resource: str, method: str, user: Any) -> bool:
    from airflow.api_fastapi.app import get_auth_manager

    check = getattr(get_auth_manager(), f"is_authorized_{resource}")
    return bool(check(method=method, user=user))


def require_user_sql_author(user: Any, what: str, rule: AuthorRule | None = None) -> None:
    """403 naming the missing permission unless ``user`` may define user SQL. ``what``: the change,
    for the message (``"create dynamic table lake.agg.daily"``)."""
    rule = rule or configured_rule()
    if rule.allows(user, _auth_manager_says):
        return
    roles = ", ".join(sorted(user_roles(user))) or "none known"
    raise ApiError(
        403,
        "permission",
        f"permission: {what} defines user SQL (a query or Spark session options run on a worker with the "
        f"catalogs' credentials), which needs [tablemgmt] {OPTION} = {rule.text or '(empty)'!s}; user "
        f"{user_name(user)!r} (roles: {roles}) matches none of it. Ask an administrator, or see "
        "docs/security.md, 'Who may define user SQL'",
    )
