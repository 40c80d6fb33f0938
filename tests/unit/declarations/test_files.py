"""Reading tables.yaml: every way a file can be absent or broken is reported, never raised, and
never reads as "declares no tables"."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from airflow_tablemgmt.declarations.files import load_declarations
from airflow_tablemgmt.declarations.parse import parse_declarations_text

GOOD = "catalogs: [{name: lake, warehouse: /w}]\ntables: [{catalog: lake, namespace: s, name: t}]\n"


def write(tmp_path: Path, name: str, content: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(content)
    return p


@pytest.mark.parametrize(
    "text", ["", "   \n", "{}", "null", "~", "# only a comment\n", "catalogs: []", "tables:"]
)
def test_files_without_a_tables_list_do_not_declare_tables(text: str) -> None:
    loaded = parse_declarations_text(text, "t.yaml")
    assert loaded.declares_tables is False
    assert loaded.tables == []


def test_explicit_lists_declare_tables() -> None:
    assert parse_declarations_text("tables: []", "t.yaml").declares_tables is True
    loaded = parse_declarations_text(GOOD, "t.yaml")
    assert loaded.declares_tables is True and [t.id for t in loaded.tables] == ["lake.s.t"]


def test_missing_file_declares_nothing_without_error(tmp_path: Path) -> None:
    loaded = load_declarations(tmp_path / "absent.yaml")
    assert loaded.errors == [] and loaded.declares_tables is False


def test_non_utf8_file_is_an_error_of_the_file(tmp_path: Path) -> None:
    p = write(tmp_path, "tables.yaml", GOOD.encode() + b"# \xff\xfe caf\xe9\n")
    loaded = load_declarations(p)
    assert loaded.declares_tables is False and loaded.tables == []
    assert [e.table for e in loaded.errors] == ["<file>"]
    assert "not UTF-8" in loaded.errors[0].message and str(p) in loaded.errors[0].message


def test_directory_at_the_path_is_an_error_of_the_file(tmp_path: Path) -> None:
    (tmp_path / "tables.yaml").mkdir()
    loaded = load_declarations(tmp_path / "tables.yaml")
    assert loaded.declares_tables is False
    assert "is a directory, not a file" in loaded.errors[0].message


def test_broken_symlink_is_an_error_not_a_missing_file(tmp_path: Path) -> None:
    os.symlink(tmp_path / "gone.yaml", tmp_path / "tables.yaml")
    loaded = load_declarations(tmp_path / "tables.yaml")
    assert loaded.declares_tables is False
    assert "broken symlink" in loaded.errors[0].message


def test_unreadable_path_is_an_error(tmp_path: Path) -> None:
    # As root nothing is unreadable by permission; a path through a regular file fails the same
    # way (the OS refuses the open) and works as any user.
    (tmp_path / "afile").write_text("x")
    loaded = load_declarations(tmp_path / "afile" / "tables.yaml")
    assert loaded.declares_tables is False
    assert loaded.errors and "cannot be read" in loaded.errors[0].message


def test_yaml_errors_and_odd_top_levels_are_errors_of_the_file() -> None:
    for text in ("tables: [", "- a\n- b", "just text", "42", "tables: {a: 1}", "{1: 2, x: 3}", "catalogs: 5"):
        loaded = parse_declarations_text(text, "t.yaml")
        assert loaded.errors, text
        assert loaded.tables == []


def test_huge_int_beyond_pythons_digit_limit_is_reported() -> None:
    loaded = parse_declarations_text(
        "tables: [{catalog: lake, namespace: s, name: t, priority: " + "9" * 5000 + "}]", "t.yaml"
    )
    assert loaded.errors and loaded.declares_tables is False
