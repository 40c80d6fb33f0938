"""core/policies.py: the Policy spec's validation errors, matching, specificity, precedence and the opt-out."""

from __future__ import annotations

import pytest

from airflow_tablemgmt.core.errors import InvalidDeclaration
from airflow_tablemgmt.core.policies import (
    OPT_OUT_PROPERTY,
    Policy,
    PolicyConflict,
    TableFacts,
    matching_policies,
    parse_policy,
    resolve,
)
from airflow_tablemgmt.core.tables import parse_table

ORDERS = TableFacts("lake", "sales.eu", "orders", "iceberg")


def policy(name: str, match: dict | None = None, actions: dict | None = None, **more: object) -> Policy:
    return parse_policy({"name": name, "match": match or {}, "actions": actions or {}, **more})


# --- validation: each error names the field, the value and what is allowed ------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"name": "Lake"}, "policies.yaml: name (policy Lake): 'Lake' is not a valid policy name (lowercase"),
        (
            {"name": "p", "match": {"namespace": "sales eu"}},
            "policies.yaml: match.namespace (policy p): 'sales eu' is not a valid pattern (a name or a glob",
        ),
        (
            {"name": "p", "match": {"format": ["iceberg", "orc"]}},
            "policies.yaml: match.format (policy p): 'orc' is not a known table format; known: delta, hudi, iceberg",
        ),
        (
            {"name": "p", "actions": {"rewrite-filez": {}}},
            "policies.yaml: actions.rewrite-filez (policy p): unknown action 'rewrite-filez'; known actions: ",
        ),
        (
            {
                "name": "p",
                "match": {"format": "iceberg"},
                "actions": {"expire-snapshots": {"retain-last": 0}},
            },
            "policies.yaml: actions.expire-snapshots.retain-last (policy p): Input should be greater than or "
            "equal to 1, got 0",
        ),
        (
            {"name": "p", "match": {"format": "delta"}, "actions": {"rewrite-files": {}}},
            "policies.yaml: actions.rewrite-files (policy p): no format this policy matches (delta) supports it; "
            "allowed: optimize, vacuum",
        ),
        (
            {"name": "p", "actions": {"refresh": {}}},
            "policies.yaml: actions.refresh (policy p): only dynamic tables refresh",
        ),
        (
            {"name": "p", "discovery-interval": 30},
            "policies.yaml: discovery-interval (policy p): 30 has no unit",
        ),
        ({"name": "p", "mtach": {}}, "policies.yaml: mtach (policy p): Extra inputs are not permitted"),
    ],
)
def test_errors_name_the_field_the_value_and_what_is_allowed(data: dict, expected: str) -> None:
    with pytest.raises(InvalidDeclaration) as e:
        parse_policy(data, "policies.yaml")
    assert str(e.value).startswith(expected), str(e.value)


def test_an_option_of_another_format_says_which_format_refused_it() -> None:
    # expire-snapshots exists for Iceberg and Paimon with different options: without match.format the block
    # must suit both, and the error says so
    with pytest.raises(InvalidDeclaration, match="for .* tables; narrow match.format"):
        policy("p", actions={"expire-snapshots": {"max-concurrent-deletes": 4}})
    assert policy("p", {"format": "iceberg"}, {"expire-snapshots": {"max-concurrent-deletes": 4}})


def test_a_policy_keeps_what_was_written_in_kebab_case() -> None:
    p = policy(
        "p",
        {"catalog": "lake", "format": "iceberg"},
        {"expire-snapshots": {"retain-last": 1}, "rewrite-files": None},
    )
    # retain-last 1 is the default, kept as written: a policy's explicit value must win over a broader one's
    assert p.actions == {"expire-snapshots": {"retain-last": 1}, "rewrite-files": {}}
    assert p.match.catalog == ["lake"] and p.match.namespace == ["*"]
    assert str(p.discovery_interval) == "1:00:00"


# --- matching and specificity -----------------------------------------------------------------------------


def test_globs_match_whole_names_and_multi_level_namespaces() -> None:
    m = policy("p", {"catalog": "lake", "namespace": "sales.*", "name": ["ord*", "items"]}).match
    assert m.matches("lake", "sales.eu", "orders", "iceberg", {})
    assert m.matches("lake", "sales.eu.b2b", "items", "iceberg", {})
    assert not m.matches("lake", "sales", "orders", "iceberg", {})  # 'sales.*' is below sales, not sales
    assert not m.matches("lake2", "sales.eu", "orders", "iceberg", {})
    assert not m.matches("lake", "sales.eu", "Orders", "iceberg", {})  # case-sensitive


def test_format_and_property_conditions() -> None:
    m = policy("p", {"format": ["iceberg", "delta"], "properties": {"write.format.default": "parq*"}}).match
    assert m.matches("c", "n", "t", "iceberg", {"write.format.default": "parquet"})
    assert not m.matches("c", "n", "t", "iceberg", {"write.format.default": "orc"})
    assert not m.matches("c", "n", "t", "iceberg", {})  # the property must be set
    assert not m.matches("c", "n", "t", "hudi", {"write.format.default": "parquet"})


def test_specificity_order_name_then_namespace_then_catalog_then_properties_then_format() -> None:
    everything = policy("everything")
    catalog_wide = policy("catalog-wide", {"catalog": "lake"})
    any_catalog_ns = policy("ns", {"namespace": "sales.eu"})
    ns_glob = policy("ns-glob", {"catalog": "lake", "namespace": "sales.*"})
    by_name = policy("by-name", {"name": "ord*"})
    with_property = policy("prop", {"catalog": "lake", "properties": {"owner": "*"}})
    table = TableFacts("lake", "sales.eu", "orders", "iceberg", {"owner": "x"})
    found = matching_policies(
        table, [everything, catalog_wide, any_catalog_ns, ns_glob, by_name, with_property]
    )
    assert [p.name for p in found] == ["by-name", "ns", "ns-glob", "prop", "catalog-wide", "everything"]
    assert by_name.match.specificity() == (1, 0, 0, 0, 0)
    assert any_catalog_ns.match.specificity() == (0, 2, 0, 0, 0)
    assert catalog_wide.match.specificity() == (0, 0, 2, 0, 0)


def test_two_equally_specific_policies_are_an_error_naming_both() -> None:
    a = policy("team-a", {"catalog": "lake", "namespace": "sales.*"})
    b = policy("team-b", {"catalog": "lake", "namespace": "sales.e?"})
    with pytest.raises(PolicyConflict) as e:
        resolve(ORDERS, [b, a])
    assert "policies 'team-a' and 'team-b' both match it with the same specificity" in str(e.value)
    assert "table lake.sales.eu.orders" in str(e.value)
    # a table only one of them matches is fine
    assert resolve(TableFacts("lake", "sales.us", "orders", "iceberg"), [a, b]).policies == ("team-a",)


# --- precedence ------------------------------------------------------------------------------------------


def test_table_over_most_specific_policy_over_catalog_wide_over_defaults() -> None:
    catalog_wide = policy(
        "lake-all",
        {"catalog": "lake", "format": "iceberg"},
        {"expire-snapshots": {"older-than": "5d", "retain-last": 5, "retries": 3}, "rewrite-manifests": {}},
    )
    sales = policy(
        "sales",
        {"catalog": "lake", "namespace": "sales.*", "format": "iceberg"},
        {"expire-snapshots": {"retain-last": 10}},
    )
    r = resolve(ORDERS, [catalog_wide, sales], {"expire-snapshots": {"older-than": "7d"}})
    es = r.actions["expire-snapshots"]
    assert (es["older-than"].value, es["older-than"].source) == ("7d", "table")
    assert (es["retain-last"].value, es["retain-last"].source) == (10, "policy:sales")
    assert (es["retries"].value, es["retries"].source) == (3, "policy:lake-all")
    assert (es["retry-delay"].value, es["retry-delay"].source) == ("5m", "default")
    assert (es["enabled"].value, es["enabled"].source) == (True, "table")
    rm = r.actions["rewrite-manifests"]
    assert (rm["enabled"].value, rm["enabled"].source) == (True, "policy:lake-all")
    assert r.policies == ("sales", "lake-all")
    assert r.enabled_actions() == ["expire-snapshots", "rewrite-manifests"]
    assert r.settings("expire-snapshots")["older-than"] == "7d"


def test_naming_an_action_enables_it_over_a_broader_disable() -> None:
    off = policy("off", {"catalog": "lake"}, {"rewrite-manifests": {"enabled": False}})
    on = policy("on", {"catalog": "lake", "namespace": "sales.eu"}, {"rewrite-manifests": {}})
    r = resolve(ORDERS, [off, on])
    assert (
        r.actions["rewrite-manifests"]["enabled"].value,
        r.actions["rewrite-manifests"]["enabled"].source,
    ) == (
        True,
        "policy:on",
    )
    # and the table's own enabled: false wins over every policy
    r = resolve(ORDERS, [off, on], {"rewrite-manifests": {"enabled": False}})
    assert r.enabled_actions() == []
    assert r.actions["rewrite-manifests"]["enabled"].source == "table"


def test_a_policys_action_the_tables_format_lacks_is_skipped_and_said() -> None:
    p = policy(
        "all", actions={"vacuum": {}, "rewrite-manifests": None}, match={"format": ["iceberg", "delta"]}
    )
    r = resolve(ORDERS, [p])
    assert list(r.actions) == ["rewrite-manifests"]
    assert [(s[0], s[1]) for s in r.skipped] == [("all", "vacuum")]


def test_a_merge_no_single_source_wrote_is_validated_and_names_its_sources() -> None:
    short = policy(
        "short",
        {"catalog": "lake", "format": "iceberg"},
        {"delete-orphans": {"older-than": "2h", "allow-below-floor": True}},
    )
    assert resolve(ORDERS, [short]).settings("delete-orphans")["older-than"] == "2h"
    # the table takes the override back but not the age: the merge is below the floor, naming both sources
    with pytest.raises(
        InvalidDeclaration,
        match=r"table lake.sales.eu.orders: the effective settings of delete-orphans \(from policy:short, table\) "
        r"are invalid: delete-orphans.older-than: 2h is below the 24-hour floor",
    ):
        resolve(ORDERS, [short], {"delete-orphans": {"allow-below-floor": False}})


def test_no_policy_no_own_actions_means_nothing_runs() -> None:
    r = resolve(ORDERS, [policy("elsewhere", {"catalog": "other"}, {"rewrite-manifests": {}})])
    assert r.actions == {} and r.policies == ()


# --- opt-out ---------------------------------------------------------------------------------------------


def test_the_opt_out_property_keeps_every_policy_away() -> None:
    p = policy("lake-all", {"catalog": "lake"}, {"rewrite-manifests": {}})
    table = TableFacts("lake", "sales.eu", "orders", "iceberg", {OPT_OUT_PROPERTY: "Disabled"})
    r = resolve(table, [p])
    assert r.actions == {} and r.policies == ()
    assert r.opted_out == "its table property tablemgmt.maintenance=disabled"
    # the table's own declaration still counts (its owner wrote it)
    assert resolve(table, [p], {"rewrite-manifests": {}}).enabled_actions() == ["rewrite-manifests"]


def test_maintenance_disabled_in_a_declaration() -> None:
    spec = parse_table(
        {"catalog": "lake", "namespace": "sales.eu", "name": "orders", "maintenance": "disabled"}
    )
    assert spec.maintenance == "disabled"
    p = policy("lake-all", {"catalog": "lake"}, {"rewrite-manifests": {}})
    r = resolve(ORDERS, [p], spec.actions, spec.maintenance)
    assert r.actions == {} and r.opted_out == "its declaration says maintenance: disabled"
    with pytest.raises(
        InvalidDeclaration,
        match="maintenance: 'disabled' opts the table out of all maintenance, but it enables rewrite-manifests",
    ):
        parse_table(
            {
                "catalog": "l",
                "namespace": "n",
                "name": "t",
                "maintenance": "disabled",
                "actions": {"rewrite-manifests": {}},
            }
        )
    with pytest.raises(InvalidDeclaration, match="maintenance: expected 'disabled' .* got 'off'"):
        parse_table({"catalog": "l", "namespace": "n", "name": "t", "maintenance": "off"})


def test_the_opt_out_is_absent_from_every_other_tables_stored_spec() -> None:
    spec = parse_table({"catalog": "l", "namespace": "n", "name": "t", "maintenance": "enabled"})
    assert "maintenance" not in spec.model_dump(mode="json", by_alias=True)
    off = parse_table({"catalog": "l", "namespace": "n", "name": "t", "maintenance": "disabled"})
    assert off.model_dump(mode="json", by_alias=True)["maintenance"] == "disabled"


def test_effective_spec_is_the_declaration_with_the_policies_merged_in() -> None:
    from airflow_tablemgmt.core.policies import effective_spec

    spec = parse_table(
        {
            "catalog": "lake",
            "namespace": "sales.eu",
            "name": "orders",
            "actions": {"expire-snapshots": {"older-than": "7d"}},
        }
    )
    assert effective_spec(spec, [policy("elsewhere", {"catalog": "other"})]) is spec
    lake = policy(
        "lake",
        {"catalog": "lake", "format": "iceberg"},
        {"expire-snapshots": {"retain-last": 5}, "rewrite-manifests": {}},
    )
    merged = effective_spec(spec, [lake])
    assert merged.enabled_actions() == ["expire-snapshots", "rewrite-manifests"]
    settings = merged.action_settings("expire-snapshots")
    assert str(settings.older_than) == "7 days, 0:00:00" and settings.retain_last == 5
