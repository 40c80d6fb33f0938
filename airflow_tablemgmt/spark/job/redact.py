"""The job's secrets kept out of its log and its result line: the catalog's sensitive values, masked."""

from __future__ import annotations

import json
import logging

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.secrets import MASK, is_sensitive


class RedactSecrets(logging.Filter):
    """Replaces the catalog's secret values in every record this job logs (an exception message may
    quote a setting back); the secrets are known once the spec is read."""

    def __init__(self) -> None:
        super().__init__()
        self.secrets: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if self.secrets:
            message = record.getMessage()
            cleaned = redact(message, self.secrets)
            if cleaned != message:
                record.msg, record.args = cleaned, None
        return True


REDACT = RedactSecrets()


def secret_values(job: JobSpec) -> list[str]:
    """The values of the catalog's sensitive properties, longest first (so none hides part of another)."""
    properties = job.catalog.get("properties") if isinstance(job.catalog, dict) else None
    if not isinstance(properties, dict):
        return []
    values = {str(v) for k, v in properties.items() if is_sensitive(str(k)) and str(v)}
    # The result line is JSON: a value with quotes or backslashes appears there escaped.
    values |= {json.dumps(v)[1:-1] for v in values}
    return sorted(values, key=len, reverse=True)


def redact(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, MASK)
    return text
