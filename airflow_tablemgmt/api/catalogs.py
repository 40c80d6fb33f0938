"""``/catalogs``: list, get, create, update, delete. Only store-owned catalogs change here. Secret
properties are masked and credentials inside URIs (rows written before they were refused) redacted."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from airflow.api_fastapi.core_api.security import GetUserDep
from fastapi import APIRouter, Depends, Path, Request, Response

from airflow_tablemgmt.api.airflow_side import authorize_dags
from airflow_tablemgmt.api.deps import get_store
from airflow_tablemgmt.api.errors import ApiError
from airflow_tablemgmt.api.schemas import CatalogIn, CatalogOut, CatalogRemovedOut, CatalogUpdate
from airflow_tablemgmt.core.text import TEXT_PATTERN
from airflow_tablemgmt.services import build_catalog, list_catalogs, set_catalog
from airflow_tablemgmt.services.catalogs import catalog_view, find_catalog, remove_catalog, updated_catalog

if TYPE_CHECKING:
    from airflow_tablemgmt.store import Store

router = APIRouter(prefix="/catalogs", tags=["catalogs"])
StoreDep = Annotated["Store", Depends(get_store)]
CatalogName = Annotated[str, Path(pattern=TEXT_PATTERN, min_length=1, max_length=250)]


@router.get("", response_model=list[CatalogOut])
def get_catalogs(store: StoreDep) -> list[CatalogOut]:
    return [CatalogOut(**c.to_dict()) for c in list_catalogs(store)]


@router.get("/{name}", response_model=CatalogOut)
def get_catalog(name: CatalogName, store: StoreDep) -> CatalogOut:
    for c in list_catalogs(store):
        if c.name == name:
            return CatalogOut(**c.to_dict())
    store.catalogs.get(name)  # raises CatalogNotFound with its message
    raise ApiError(404, "name", f"name: no catalog {name!r}")


def _saved(store: Store, name: str, outcome: str) -> CatalogOut:
    return CatalogOut(**catalog_view(store.catalogs.get(name)).to_dict(), outcome=outcome)  # type: ignore[arg-type]


@router.post("", response_model=CatalogOut, status_code=201)
def create_catalog(body: CatalogIn, request: Request, user: GetUserDep, store: StoreDep) -> CatalogOut:
    """Create a catalog. A catalog reaches every table in it, so this needs permission on all DAGs."""
    authorize_dags(request, user, "PUT", [None])
    spec = build_catalog(
        body.name, type=body.type, warehouse=body.warehouse, properties=body.properties, source="body"
    )
    if find_catalog(store, spec.name) is not None:
        raise ApiError(
            409, "name", f"name: catalog {spec.name} exists already; change it with PUT /catalogs/{spec.name}"
        )
    return _saved(store, spec.name, set_catalog(store, spec).outcome)


@router.put("/{name}", response_model=CatalogOut)
def update_catalog(
    name: CatalogName,
    body: CatalogUpdate,
    request: Request,
    response: Response,
    user: GetUserDep,
    store: StoreDep,
) -> CatalogOut:
    """Create or change a store-owned catalog; one declared in tables.yaml answers 409. A field the
    body leaves out keeps its value (``properties: {}`` clears them)."""
    authorize_dags(request, user, "PUT", [None])
    spec = updated_catalog(
        store, name, type=body.type, warehouse=body.warehouse, properties=body.properties, source="body"
    )
    outcome = set_catalog(store, spec).outcome
    if outcome == "created":
        response.status_code = 201
    return _saved(store, spec.name, outcome)


@router.delete("/{name}", response_model=CatalogRemovedOut)
def delete_catalog(
    name: CatalogName, request: Request, user: GetUserDep, store: StoreDep
) -> CatalogRemovedOut:
    """Remove a store-owned catalog. While a table (a dynamic one included) uses it the answer is 409
    naming them; a catalog declared in tables.yaml is 409 too. Needs permission on all DAGs."""
    authorize_dags(request, user, "DELETE", [None])
    remove_catalog(store, name)
    return CatalogRemovedOut(name=name, removed=True)
