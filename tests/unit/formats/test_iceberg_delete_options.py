"""rewrite-files' delete options (delete-ratio-threshold, delete-file-threshold, remove-dangling-deletes):
validated where a declaration is parsed, each error naming the field, the value and what is allowed, and
passed to ``rewrite_data_files`` only when set; rewrite-deletes' report on a v3 table (deletes_outcome)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_tablemgmt.declarations.parse import parse_declarations_text
from airflow_tablemgmt.formats.iceberg.actions import RewriteDeletesSettings, RewriteFilesSettings
from airflow_tablemgmt.formats.iceberg.job.compaction import deletes_outcome, rewrite_files_options
from airflow_tablemgmt.spark.errors import InvalidJobSpec
from airflow_tablemgmt.spark.job.maintainers.settings import parse_settings


def _declare(options: str) -> tuple[list[str], Any]:
    text = (
        "catalogs:\n  - name: lake\n    warehouse: /tmp/wh\n"
        "tables:\n  - catalog: lake\n    namespace: db\n    name: t\n"
        f"    actions:\n      rewrite-files:\n{options}"
    )
    loaded = parse_declarations_text(text, "tables.yaml")
    return [e.message for e in loaded.errors], loaded.tables


@pytest.mark.parametrize("value", ["0", "1.5", "-0.1", "true", "'most'", ".nan"])
def test_delete_ratio_threshold_out_of_range_names_field_value_and_range(value: str) -> None:
    errors, tables = _declare(f"        delete-ratio-threshold: {value}\n")
    assert not tables and len(errors) == 1
    message = errors[0]
    assert "tables[0].actions.rewrite-files.delete-ratio-threshold" in message
    assert "> 0 and <= 1" in message and "got " in message


def test_delete_ratio_threshold_error_quotes_the_value() -> None:
    errors, _ = _declare("        delete-ratio-threshold: 1.5\n")
    assert errors[0].endswith("got 1.5")


def test_delete_options_are_parsed_and_passed_to_the_procedure() -> None:
    errors, tables = _declare(
        "        delete-ratio-threshold: 0.2\n"
        "        delete-file-threshold: 3\n"
        "        remove-dangling-deletes: true\n"
    )
    assert not errors
    settings = tables[0].action_settings("rewrite-files")
    assert (settings.delete_ratio_threshold, settings.delete_file_threshold) == (0.2, 3)
    options = rewrite_files_options(settings)
    assert options["delete-ratio-threshold"] == 0.2
    assert options["delete-file-threshold"] == 3
    assert options["remove-dangling-deletes"] is True


def test_unset_thresholds_leave_icebergs_defaults() -> None:
    options = rewrite_files_options(RewriteFilesSettings())
    assert "delete-ratio-threshold" not in options and "delete-file-threshold" not in options
    assert options["remove-dangling-deletes"] is False


@pytest.mark.parametrize(
    ("options", "field", "allowed"),
    [
        ({"delete-file-threshold": 0}, "rewrite-files.delete-file-threshold", "greater than or equal to 1"),
        ({"remove-dangling-deletes": "maybe"}, "rewrite-files.remove-dangling-deletes", "valid boolean"),
        ({"delete-ratio-threshold": 2}, "rewrite-files.delete-ratio-threshold", "> 0 and <= 1"),
    ],
)
def test_the_job_refuses_bad_options_naming_them(options: dict[str, Any], field: str, allowed: str) -> None:
    with pytest.raises(InvalidJobSpec) as err:
        parse_settings(RewriteFilesSettings, options, "rewrite-files")
    message = str(err.value)
    assert field in message and allowed in message
    assert repr(next(iter(options.values()))) in message


def _metrics(position: int, dvs: int) -> dict[str, int]:
    return {"position_delete_files": position, "deletion_vectors": dvs, "delete_files": position + dvs}


def test_outcome_on_a_table_whose_deletes_are_all_deletion_vectors() -> None:
    out = deletes_outcome(_metrics(0, 3), _metrics(0, 3), RewriteDeletesSettings())
    assert out["outcome"].startswith("nothing to do: the table's deletes are 3 deletion vectors")
    assert "rewrite-files" in out["outcome"]
    assert out["converted_position_delete_files"] == 0


def test_outcome_names_one_vector_in_the_singular() -> None:
    out = deletes_outcome(_metrics(0, 1), _metrics(0, 1), RewriteDeletesSettings())
    assert out["outcome"].startswith("nothing to do: the table's deletes are 1 deletion vector and no v2")


def test_outcome_when_nothing_was_converted() -> None:
    out = deletes_outcome(_metrics(1, 0), _metrics(1, 0), RewriteDeletesSettings())
    assert out["outcome"].startswith("converted nothing; 1 v2 position delete file left (")


def test_outcome_without_any_deletes() -> None:
    out = deletes_outcome(_metrics(0, 0), _metrics(0, 0), RewriteDeletesSettings())
    assert out["outcome"] == "nothing to do: the table has no position delete files and no deletion vectors"


def test_outcome_of_a_conversion_and_what_it_left() -> None:
    out = deletes_outcome(_metrics(4, 0), _metrics(0, 1), RewriteDeletesSettings(rewrite_all=True))
    assert (
        out["outcome"]
        == "converted 4 v2 position delete files into deletion vectors (0 -> 1 deletion vectors)"
    )
    assert (out["converted_position_delete_files"], out["deletion_vectors_after"]) == (4, 1)

    partly = deletes_outcome(_metrics(6, 0), _metrics(2, 2), RewriteDeletesSettings())
    assert partly["outcome"].startswith("converted 4 v2 position delete files")
    assert (
        "; 2 v2 position delete files left (their partition's group had fewer than min-input-files, 5"
        in (partly["outcome"])
    )
    assert "rewrite-all: true" in partly["outcome"]
