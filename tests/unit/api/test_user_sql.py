"""Who may define user SQL (``[tablemgmt] user_sql_authors``, api/user_sql.py): the rule's grammar, its
strict default (the simple auth manager's admin only; a ``user``-role DAG editor is refused), and the
routes that write user SQL asking it (create, alter, refresh and resume with options), while a refresh
without options and the reads do not. The real api-server and its roles: tests/e2e/test_api_dynamic.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from fastapi.testclient import TestClient

from airflow_tablemgmt.api.errors import ApiError
from airflow_tablemgmt.api.user_sql import DEFAULT, AuthorRule, RuleError, require_user_sql_author
from airflow_tablemgmt.store import Store
from tests.unit.api import test_dynamic_routes as _routes
from tests.unit.api.test_dynamic_routes import DEFINITION, Airflow, T

airflow, client, store = _routes.airflow, _routes.client, _routes.store  # its fixtures


@dataclass
class SimpleUser:
    """The simple auth manager's user: a name and one role."""

    username: str
    role: str

    def get_name(self) -> str:
        return self.username


@dataclass
class FabRole:
    name: str


@dataclass
class FabUser:
    username: str
    roles: list[FabRole] = field(default_factory=list)

    def get_name(self) -> str:
        return self.username


def test_the_default_allows_admins_only() -> None:
    rule = AuthorRule.parse(DEFAULT)
    assert rule.allows(SimpleUser("root", "admin"))
    for role in ("op", "user", "viewer"):
        assert not rule.allows(SimpleUser("x", role)), role
    assert rule.allows(FabUser("ann", [FabRole("Viewer"), FabRole("Admin")]))  # FAB role names, any case
    assert not rule.allows(FabUser("bob", [FabRole("User")]))
    assert not rule.allows(object())  # a user the rule knows nothing about


def test_roles_users_permissions_and_star() -> None:
    rule = AuthorRule.parse(" role:Op , user:alice,permission:connection:put ")
    assert rule.roles == {"op"} and rule.users == {"alice"} and rule.permissions == (("connection", "PUT"),)
    assert rule.allows(SimpleUser("x", "op")) and rule.allows(SimpleUser("alice", "viewer"))
    asked: list[tuple[str, str, Any]] = []

    def manager(resource: str, method: str, user: Any) -> bool:
        asked.append((resource, method, user.username))
        return user.username == "carol"

    assert rule.allows(SimpleUser("carol", "user"), manager)
    assert not rule.allows(SimpleUser("dave", "user"), manager)
    assert asked == [("connection", "PUT", "carol"), ("connection", "PUT", "dave")]
    assert AuthorRule.parse("*").allows(SimpleUser("anyone", "viewer"))
    assert not AuthorRule.parse("").allows(SimpleUser("root", "admin"))  # empty: nobody


@pytest.mark.parametrize(
    "text", ["admin", "role:", "group:x", "permission:dag:PUT", "permission:connection:PATCH"]
)
def test_an_unreadable_entry_is_an_error_naming_it_and_the_forms(text: str) -> None:
    with pytest.raises(RuleError) as e:
        AuthorRule.parse(text)
    assert "[tablemgmt] user_sql_authors" in str(e.value) and repr(text.split(",")[0].strip()) in str(e.value)


def test_an_unreadable_setting_refuses_everyone(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_tablemgmt.api.user_sql import configured_rule

    monkeypatch.setenv("AIRFLOW__TABLEMGMT__USER_SQL_AUTHORS", "admins")
    assert not configured_rule().allows(SimpleUser("root", "admin"))
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__USER_SQL_AUTHORS", "role:op")
    assert configured_rule().allows(SimpleUser("o", "op"))
    monkeypatch.delenv("AIRFLOW__TABLEMGMT__USER_SQL_AUTHORS")
    assert configured_rule().text == DEFAULT


def test_the_403_names_the_missing_permission_and_the_user() -> None:
    with pytest.raises(ApiError) as e:
        require_user_sql_author(
            SimpleUser("editor", "user"), "creating dynamic table a.b.c", AuthorRule.parse(DEFAULT)
        )
    assert (e.value.status, e.value.field) == (403, "permission")
    assert "[tablemgmt] user_sql_authors = role:admin" in e.value.detail
    assert "'editor' (roles: user)" in e.value.detail and "creating dynamic table a.b.c" in e.value.detail


# -- the routes that write user SQL ask the rule; the others do not -------------------------------------


def test_create_alter_and_options_need_the_rule(client: TestClient, store: Store, airflow: Airflow) -> None:
    airflow.user_sql_allowed = False
    before = store.dynamic.get(T)
    calls = [
        ("POST", "/dynamic-tables", {**DEFINITION, "name": "other"}),
        ("PATCH", f"/dynamic-tables/{T}", {"freshness": "1 HOUR"}),
        ("POST", f"/dynamic-tables/{T}/refresh", {"dynamicOptions": {"spark.sql.shuffle.partitions": "4"}}),
    ]
    for method, path, body in calls:
        r = client.request(method, path, json=body)
        assert r.status_code == 403, (path, r.text)
        assert r.json()["field"] == "permission" and "user_sql_authors" in r.json()["detail"]
    client.post(f"/dynamic-tables/{T}/suspend")
    r = client.post(
        f"/dynamic-tables/{T}/resume", json={"dynamic_options": {"spark.sql.shuffle.partitions": "4"}}
    )
    assert r.status_code == 403, r.text
    assert store.dynamic.find("lake.agg.other") is None
    assert store.dynamic.get(T).definition == before.definition and airflow.runs == {}
    assert len(airflow.user_sql_checks) == 4


def test_a_refresh_without_options_and_a_plain_resume_need_only_the_dag_permission(
    client: TestClient, airflow: Airflow
) -> None:
    airflow.user_sql_allowed = False
    r = client.post(
        f"/dynamic-tables/{T}/refresh", json={"isPeriodic": True, "scheduleTime": "2026-02-02 00:00:00"}
    )
    assert r.status_code == 200, r.text
    assert client.post(f"/dynamic-tables/{T}/suspend").status_code == 200
    assert client.post(f"/dynamic-tables/{T}/resume").status_code == 200
    assert client.get(f"/dynamic-tables/{T}").status_code == 200
    assert airflow.user_sql_checks == []
