"""core/text.py's limits are the store's column widths, and its checks name the field."""

from __future__ import annotations

import pytest

from airflow_tablemgmt.core import text
from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
from airflow_tablemgmt.store.models import CatalogRow, ProcessRow, TableRow


def test_limits_match_the_store_columns() -> None:
    assert TableRow.__table__.c.owner_team.type.length == text.OWNER_MAX_LEN
    assert CatalogRow.__table__.c.warehouse.type.length == text.WAREHOUSE_MAX_LEN
    assert TableRow.__table__.c.table_id.type.length == text.TABLE_ID_MAX_LEN
    assert ProcessRow.__table__.c.table_id.type.length == text.TABLE_ID_MAX_LEN
    assert ProcessRow.__table__.c.action.type.length == text.ACTION_MAX_LEN
    assert TableRow.__table__.c.format.type.length == text.FORMAT_MAX_LEN


@pytest.mark.parametrize("bad", ["a\x00b", "a\nb", "a\tb", "a\x7fb", "a\x85b", "o" * 256])
def test_a_bad_owner_is_refused_naming_owner(bad: str) -> None:
    with pytest.raises(ValueError, match="owner"):
        TableSpec(catalog="c", namespace="n", name="t", owner=bad)


def test_fine_text_passes() -> None:
    assert TableSpec(catalog="c", namespace="n", name="t", owner="Data Team (é)").owner == "Data Team (é)"
    assert text.check_text("o" * 255, "owner", 255) == "o" * 255


def test_a_warehouse_or_property_with_nul_is_refused() -> None:
    with pytest.raises(ValueError, match="warehouse"):
        CatalogSpec(name="c", warehouse="/tmp/a\x00b")
    with pytest.raises(ValueError, match="warehouse"):
        CatalogSpec(name="c", warehouse="/" + "w" * 2048)
    with pytest.raises(ValueError, match="properties.k"):
        CatalogSpec(name="c", warehouse="/tmp/w", properties={"k": "v\x00"})
    multi = CatalogSpec(name="c", warehouse="/tmp/w", properties={"k": "line1\nline2"})
    assert multi.properties["k"] == "line1\nline2"  # property values may span lines
