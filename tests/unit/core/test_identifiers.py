import pytest

from airflow_tablemgmt.core.errors import InvalidIdentifier
from airflow_tablemgmt.core.identifiers import TableIdentifier, quote, validate_identifier


@pytest.mark.parametrize("bad", ["", "1abc", "a b", "a`b", "x;DROP TABLE y", "a.b", "é", "a" * 129])
def test_rejects_unsafe_identifiers(bad: str) -> None:
    with pytest.raises(InvalidIdentifier, match="column"):
        validate_identifier(bad, "column")


def test_quotes_and_parses() -> None:
    t = TableIdentifier.parse("lake.db.events")
    assert t.quoted == "`lake`.`db`.`events`"
    assert t.in_catalog == "db.events"
    assert str(t) == "lake.db.events"
    assert quote("_x1") == "`_x1`"


def test_parse_needs_three_parts() -> None:
    with pytest.raises(InvalidIdentifier, match="catalog.namespace.table"):
        TableIdentifier.parse("db.events")
