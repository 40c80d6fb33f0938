"""Which catalog properties are secrets, and how a declaration refers to one without holding it.

A catalog property whose key looks sensitive (Airflow's sensitive-field list plus
``credential|token|key|authorization|secret``, and every ``header.*``) must be a *reference*, never
the secret itself — except the keys of :data:`NOT_SENSITIVE`, settings whose names only look like
secrets (the REST catalog's access-delegation header, credential-provider class names, a KMS key's id,
the OAuth2 token flags), so neither the store, ``tables.yaml``, the DAG's serialized form nor a log ever
holds the plaintext. A reference is resolved on the worker, just before the job starts:

- ``conn:<conn_id>`` — the password of an Airflow connection;
- ``conn:<conn_id>.<field>`` — ``login``, ``password``, ``host``, ``schema``, ``port`` or
  ``extra.<key>`` of an Airflow connection;
- ``var:<key>`` — an Airflow variable;
- ``env:<NAME>`` — an environment variable of the worker.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Airflow's DEFAULT_SENSITIVE_FIELDS (airflow.utils.log.secrets_masker) plus our own additions.
AIRFLOW_SENSITIVE_FIELDS = (
    "access_token",
    "api_key",
    "apikey",
    "authorization",
    "passphrase",
    "passwd",
    "password",
    "private_key",
    "secret",
    "token",
    "keyfile_dict",
    "service_account",
)
EXTRA_SENSITIVE = ("credential", "token", "key", "authorization", "secret")
_SENSITIVE = re.compile(
    "|".join(re.escape(w).replace("_", "[-_.]?") for w in (*AIRFLOW_SENSITIVE_FIELDS, *EXTRA_SENSITIVE)),
    re.IGNORECASE,
)
#: The same rule as one regular expression in a syntax Java reads too: what a Spark Connect server with its UI
#: on redacts there (``spark.redaction.regex``: its SQL pages show each session's settings, catalogs' included).
SENSITIVE_REGEX = "(?i)" + _SENSITIVE.pattern
_REFERENCE = re.compile(
    r"^(?:conn:(?P<conn>[A-Za-z0-9_.-]+?)(?:\.(?P<field>login|password|host|schema|port|extra\.[A-Za-z0-9_.-]+))?"
    r"|var:(?P<var>[A-Za-z0-9_.-]+)"
    r"|env:(?P<env>[A-Za-z_][A-Za-z0-9_]*))$"
)
REFERENCE_RULE = (
    "a reference, not the secret: 'conn:<conn_id>' (its password), 'conn:<conn_id>.<login|password|host|"
    "schema|port|extra.KEY>', 'var:<variable>' or 'env:<NAME>'"
)
MASK = "***"
# Settings whose names match the rule above but hold no secret, matched against the whole key.
NOT_SENSITIVE = re.compile(
    r"(?:header\.x-iceberg-access-delegation"  # vended-credentials / remote-signing
    r"|(?:.*[-_.])?credentials?[-_.]provider(?:[-_.](?:class|type))?"  # a class name, e.g. client.credentials-provider
    r"|.*kms[-_.]?key[-_.]?(?:id|arn)"  # which KMS key encrypts, not a key
    r"|token[-_.](?:refresh|exchange)[-_.]enabled|token[-_.]expires[-_.]in[-_.]ms"  # REST OAuth2 switches
    r"|gcs\.oauth2\.token[-_.]expires[-_.]at"  # when a GCS token expires (pyarrow needs it beside the token)
    r"|.*[-_.]key[-_.]prefix)",  # an object-key prefix
    re.IGNORECASE,
)


def is_sensitive(key: str) -> bool:
    """True if a property (or option, or header) named ``key`` holds a secret."""
    k = key.lower()
    if NOT_SENSITIVE.fullmatch(k):
        return False
    return k.startswith("header.") or bool(_SENSITIVE.search(k))


@dataclass(frozen=True)
class SecretReference:
    """A parsed reference: ``kind`` is ``conn``, ``var`` or ``env``."""

    kind: str
    name: str
    field: str = "password"


def parse_reference(value: Any) -> SecretReference | None:
    """The reference ``value`` names, or None if it is not a reference."""
    if not isinstance(value, str):
        return None
    m = _REFERENCE.match(value.strip())
    if m is None:
        return None
    if m.group("conn"):
        return SecretReference("conn", m.group("conn"), m.group("field") or "password")
    if m.group("var"):
        return SecretReference("var", m.group("var"))
    return SecretReference("env", m.group("env"))


def check_secret_properties(properties: Mapping[str, Any], field: str = "properties") -> None:
    """Raise ``ValueError`` naming the first sensitive key whose value is not a reference."""
    for key, value in properties.items():
        if is_sensitive(key) and parse_reference(value) is None:
            raise ValueError(
                f"{field}.{key}: a secret must be given as {REFERENCE_RULE}; the value was not stored"
            )


def masked(properties: Mapping[str, Any]) -> dict[str, Any]:
    """A copy with every sensitive value replaced by ``***`` (for logs, XCom and the CLI)."""
    return {k: (MASK if is_sensitive(k) else v) for k, v in properties.items()}
