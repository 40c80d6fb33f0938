"""``/policies`` (list, get, create or update, delete) and ``GET /tables/{table_id}/explain``, thin over
``services/policies.py`` and validated by the same spec as YAML and the CLI (``core/policies.py``).

A policy reaches every table it matches, also tables not registered yet, so changing or deleting one needs
permission on every DAG, as changing a catalog does; reading needs a signed-in user. A policy declared in a
declarations file answers 409 naming the file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from airflow.api_fastapi.core_api.security import GetUserDep
from fastapi import APIRouter, Body, Depends, Path, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from airflow_tablemgmt.api.airflow_side import authorize_dags
from airflow_tablemgmt.api.deps import get_store
from airflow_tablemgmt.api.errors import ApiError
from airflow_tablemgmt.core.text import TEXT_PATTERN

if TYPE_CHECKING:
    from airflow_tablemgmt.store import Store

router = APIRouter(tags=["policies"])
StoreDep = Annotated["Store", Depends(get_store)]
PolicyName = Annotated[
    str, Path(pattern=TEXT_PATTERN, min_length=1, max_length=63, description="the policy's name")
]
TableId = Annotated[
    str, Path(pattern=TEXT_PATTERN, min_length=5, max_length=800, description="catalog.namespace.table")
]
_EXAMPLE = {
    "match": {"catalog": "lake", "namespace": "sales.*", "format": "iceberg"},
    "actions": {"expire-snapshots": {"older-than": "5d"}, "rewrite-manifests": {}},
    "discovery-interval": "1h",
}


class PolicyOut(BaseModel):
    """A policy as declared (kebab-case keys, as in YAML), who owns it and how many tables it manages."""

    model_config = ConfigDict(extra="allow")

    name: str
    description: str
    match: dict[str, Any]
    actions: dict[str, dict[str, Any]]
    discovery_interval: str = Field(alias="discovery-interval")
    managed_by: str = Field(alias="managed-by", description="code (a declarations file) or store (REST, CLI)")
    source: str | None = Field(description="the declarations file of a code-owned policy")
    specificity: list[int] = Field(
        description="(name, namespace, catalog, properties, format); docs/policies.md"
    )
    tables: int = Field(description="live tables this policy enrolled")
    outcome: str | None = Field(default=None, description="created | updated | unchanged (PUT only)")


class PolicyDeletedOut(BaseModel):
    name: str
    deleted: bool


class SettingOut(BaseModel):
    value: Any
    source: str = Field(description="table | policy:<name> | default")


class MatchingPolicyOut(BaseModel):
    name: str
    specificity: list[int]
    applies: bool


class SkippedActionOut(BaseModel):
    policy: str
    action: str
    why: str


class ExplainOut(BaseModel):
    """Every effective setting of each action and where it comes from."""

    model_config = ConfigDict(populate_by_name=True)

    table: str
    format: str
    managed_by: str | None = Field(alias="managed-by")
    enrolled_by: str | None = Field(alias="enrolled-by")
    opted_out: str | None = Field(alias="opted-out", description="why no policy applies, when opted out")
    policies: list[MatchingPolicyOut] = Field(description="the matching policies, most specific first")
    enabled: list[str]
    actions: dict[str, dict[str, SettingOut]]
    skipped: list[SkippedActionOut]
    properties: dict[str, str] | None
    notes: list[str]
    error: str | None = Field(description="a tie of two policies, or a merge that does not validate")
    applied: bool = Field(
        description="whether the table's DAGs run these settings: true for a registered table (declared or "
        "enrolled), false for a table not registered"
    )


@router.get("/policies", response_model=list[PolicyOut], response_model_by_alias=True)
def get_policies(store: StoreDep) -> Any:
    from airflow_tablemgmt.services.policies import list_policies

    return list_policies(store)


@router.get("/policies/{name}", response_model=PolicyOut, response_model_by_alias=True)
def get_policy(name: PolicyName, store: StoreDep) -> Any:
    from airflow_tablemgmt.services.policies import show_policy

    return show_policy(store, name)


@router.put(
    "/policies/{name}",
    response_model=PolicyOut,
    response_model_by_alias=True,
    responses={
        201: {"model": PolicyOut, "description": "the policy was created (200: an existing one replaced)"}
    },
)
def put_policy(
    name: PolicyName,
    body: Annotated[
        dict[str, Any],
        Body(description="the policy as in YAML (match, actions, discovery-interval)", examples=[_EXAMPLE]),
    ],
    request: Request,
    response: Response,
    user: GetUserDep,
    store: StoreDep,
) -> Any:
    """Create or replace a policy owned by the store (201 when created). A policy of a declarations file
    answers 409. Needs permission on every DAG (a policy reaches every table it matches)."""
    from airflow_tablemgmt.services.policies import apply_policy, show_policy

    authorize_dags(request, user, "PUT", [None])
    if "name" in body and body["name"] != name:
        raise ApiError(
            422, "name", f"name: the body names {str(body['name'])[:80]!r}, the path {name!r}; give one"
        )
    result = apply_policy(store, {**body, "name": name}, source="body")
    if result.outcome == "created":
        response.status_code = 201
    return {**show_policy(store, name), "outcome": result.outcome}


@router.delete("/policies/{name}", response_model=PolicyDeletedOut)
def delete_policy(name: PolicyName, request: Request, user: GetUserDep, store: StoreDep) -> PolicyDeletedOut:
    """Delete a policy owned by the store; the tables it enrolled are retired by the next discovery pass."""
    from airflow_tablemgmt.services.policies import delete_policy as delete

    authorize_dags(request, user, "DELETE", [None])
    delete(store, name)
    return PolicyDeletedOut(name=name, deleted=True)


@router.get(
    "/tables/{table_id}/explain", response_model=ExplainOut, response_model_by_alias=True, tags=["tables"]
)
def explain_table(
    table_id: TableId,
    store: StoreDep,
    format: Annotated[
        str | None,
        Query(max_length=64, pattern=TEXT_PATTERN, description="a table not registered: its format"),
    ] = None,
    read_properties: Annotated[
        bool, Query(description="read the table's properties from its catalog (no JVM) to match with")
    ] = True,
) -> Any:
    """The table's effective settings per action, each with its source (``table``, ``policy:<name>``,
    ``default``): its own declaration > the most specific matching policy > ... > the defaults."""
    from airflow_tablemgmt.services.policies import explain

    return explain(store, table_id, format=format, read_properties=read_properties).to_dict()
