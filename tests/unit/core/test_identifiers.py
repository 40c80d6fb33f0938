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


@pytest.mark.parametrize("bad", ["orders\n", "orders\r\n", "\norders", "orders "])
def test_identifiers_are_matched_whole(bad: str) -> None:
    with pytest.raises(InvalidIdentifier, match="name"):
        validate_identifier(bad)
    with pytest.raises(InvalidIdentifier):
        TableIdentifier("lake", "sales", bad)


def test_table_name_with_trailing_newline_is_rejected_in_a_spec() -> None:
    from airflow_tablemgmt.core.errors import InvalidDeclaration
    from airflow_tablemgmt.core.tables import parse_table

    with pytest.raises(InvalidDeclaration, match=r"name: 'orders\\n' is not a valid identifier"):
        parse_table({"catalog": "lake", "namespace": "sales", "name": "orders\n"})


def test_airflow_limits_are_the_ones_airflow_enforces() -> None:
    from airflow.models.base import ID_LEN
    from airflow.sdk.definitions.dag import TAG_MAX_LEN

    from airflow_tablemgmt.core.identifiers import AIRFLOW_DAG_ID_MAX_LEN, AIRFLOW_TAG_MAX_LEN

    assert (AIRFLOW_DAG_ID_MAX_LEN, AIRFLOW_TAG_MAX_LEN) == (ID_LEN, TAG_MAX_LEN)


def test_table_id_too_long_for_an_airflow_tag_is_rejected_with_the_limit() -> None:
    from airflow_tablemgmt.core.errors import InvalidDeclaration
    from airflow_tablemgmt.core.tables import parse_table

    name = "t" * 95  # lake.sales.<95> = 106 chars; the table id is a DAG tag (max 100)
    with pytest.raises(
        InvalidDeclaration,
        match=r"table id lake\.sales\.t+: 106 chars; it is a tag of its DAGs and Airflow allows tags of 100",
    ):
        parse_table({"catalog": "lake", "namespace": "sales", "name": name})
    ok = parse_table({"catalog": "lake", "namespace": "sales", "name": "t" * 89})  # exactly 100
    assert len(ok.id) == 100


def test_dag_id_limit_checked_for_the_longest_action() -> None:
    from airflow_tablemgmt.core.naming import dag_id_length_problem

    long_id = "c" * 100 + "." + "n" * 100 + "." + "t" * 30  # 232 chars
    problem = dag_id_length_problem(long_id, ["rewrite-deletes", "expire-data"])
    assert problem is not None
    assert "__rewrite-deletes would be 254 chars, Airflow allows 250" in problem
    assert dag_id_length_problem("lake.s.t", ["rewrite-deletes"]) is None
