"""Secret references resolve on the worker through Airflow's own connections/variables, and are masked."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.secrets import MASK, masked
from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.hooks.secrets import (
    SecretResolutionError,
    resolve_catalog,
    resolve_catalog_spec,
)
from airflow_tablemgmt.spark.launch.submit import build_submit_spec, write_spec

SECRET = "s3cr3t-value-4242"


def _redact(text: str) -> str:
    from airflow.sdk._shared.secrets_masker import redact

    return str(redact(text))


@pytest.fixture
def conn_and_var(monkeypatch: pytest.MonkeyPatch) -> None:
    # Airflow's env-var secrets backend: the same lookup path a worker uses, no DB needed.
    monkeypatch.setenv(
        "AIRFLOW_CONN_TMS_S3",
        json.dumps(
            {
                "conn_type": "aws",
                "login": "AKIA-login-1234",
                "password": "conn-password-9876",
                "extra": {"token": "extra-token-5555"},
            }
        ),
    )
    monkeypatch.setenv("AIRFLOW_VAR_TMS_HEADER", "variable-value-7777")
    monkeypatch.setenv("TMS_TEST_SECRET", SECRET)


def _catalog(**props: str) -> dict:
    return CatalogSpec(name="lake", warehouse="/tmp/wh", properties=props).model_dump(mode="json")


def test_conn_var_and_env_references_resolve(conn_and_var: None) -> None:
    resolved = resolve_catalog(
        _catalog(
            **{
                "s3.access-key-id": "conn:tms_s3.login",
                "s3.secret-access-key": "conn:tms_s3",
                "s3.session-token": "conn:tms_s3.extra.token",
                "header.x-api": "var:tms_header",
                "spark.hadoop.fs.s3a.secret.key": "env:TMS_TEST_SECRET",
                "io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
            }
        )
    )
    assert resolved["properties"] == {
        "s3.access-key-id": "AKIA-login-1234",
        "s3.secret-access-key": "conn-password-9876",
        "s3.session-token": "extra-token-5555",
        "header.x-api": "variable-value-7777",
        "spark.hadoop.fs.s3a.secret.key": SECRET,
        "io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
    }
    assert resolved["name"] == "lake" and resolved["warehouse"] == "/tmp/wh"


def test_every_resolved_value_is_registered_with_airflows_masker(conn_and_var: None) -> None:
    resolve_catalog(
        _catalog(**{"header.x-api": "var:tms_header", "s3.secret-access-key": "env:TMS_TEST_SECRET"})
    )
    text = _redact(f"cmd --conf a={SECRET} --conf b=variable-value-7777")
    assert SECRET not in text and "variable-value-7777" not in text
    assert "***" in text


@pytest.mark.parametrize(
    ("reference", "names"),
    [
        ("env:TMS_NOT_SET_ANYWHERE", "environment variable TMS_NOT_SET_ANYWHERE is not set"),
        ("var:tms_no_such_variable", "Airflow variable 'tms_no_such_variable'"),
        ("conn:tms_no_such_conn", "Airflow connection 'tms_no_such_conn'"),
        ("conn:tms_s3.extra.nothing", "has no extra field 'nothing'"),
        ("conn:tms_s3.host", "has no host"),
    ],
)
def test_unresolvable_reference_names_property_and_reference_not_secrets(
    conn_and_var: None, reference: str, names: str
) -> None:
    with pytest.raises(SecretResolutionError) as err:
        resolve_catalog(_catalog(**{"s3.secret-access-key": reference, "other": "conn:tms_s3"}))
    message = str(err.value)
    assert "s3.secret-access-key" in message and reference in message and names in message
    assert "conn-password-9876" not in message


def test_resolve_catalog_spec_keeps_references_out_of_the_original(conn_and_var: None) -> None:
    spec = CatalogSpec(name="lake", warehouse="/tmp/wh", properties={"header.x": "env:TMS_TEST_SECRET"})
    resolved = resolve_catalog_spec(spec)
    assert resolved.properties["header.x"] == SECRET
    assert spec.properties["header.x"] == "env:TMS_TEST_SECRET"


def test_submission_argv_carries_no_catalog_property(tmp_path: Path, conn_and_var: None) -> None:
    catalog = _catalog(
        **{"header.x-test": "env:TMS_TEST_SECRET", "s3.secret-access-key": "env:TMS_TEST_SECRET"}
    )
    job = JobSpec(
        table={"catalog": "lake", "namespace": "s", "name": "t"},
        catalog=resolve_catalog(catalog),
        action="rewrite-files",
    )
    spec_path = write_spec(job, tmp_path / "job" / "job.json")
    argv = " ".join(build_submit_spec(job, spec_path).argv("spark-submit"))
    assert SECRET not in argv
    assert "header.x-test" not in argv and "secret-access-key" not in argv
    # The spec file carries them, readable by the job's user only, in a directory only it can list.
    assert stat.S_IMODE(spec_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(spec_path.parent.stat().st_mode) == 0o700
    assert json.loads(spec_path.read_text())["catalog"]["properties"]["header.x-test"] == SECRET


def test_masked_hides_every_sensitive_catalog_property() -> None:
    shown = masked({"header.x": "a", "s3.secret-access-key": "b", "uri": "http://c", "credential": "d"})
    assert shown == {"header.x": MASK, "s3.secret-access-key": MASK, "uri": "http://c", "credential": MASK}
