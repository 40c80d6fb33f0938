"""Credentials inside a URI: refused when a catalog is written, redacted when one is shown.

A catalog's ``warehouse``, its ``uri`` and any other URI-valued property are shown to every user who
may read catalogs (``GET /catalogs``, ``tablemgmt catalogs``), so a secret inside one —
``jdbc:postgresql://pg/cat?user=u&password=S3CRET``, ``http://u:pw@host``, ``s3a://AK:SK@bucket``,
``jdbc:sqlserver://h;password=x`` — would be shown to all of them. Such a value is refused on write
(the YAML file, REST, the CLI, the store), with how to pass the secret instead: a separate property
holding a reference (``conn:``, ``var:``, ``env:``, resolved on the worker). A row written before this
rule still loads (its jobs keep working) but is shown redacted.

What counts, by structure: a password in the user-info (``user:password@``; a user name alone is not a
secret), Oracle's ``jdbc:oracle:thin:user/password@host``, and a parameter — after ``?``, ``&``, ``;``
or ``:`` in a URI, or a pair of a ``key=value;...`` connection string (ADO.NET, ODBC, Azure Storage's
``AccountKey=``) — whose name carries a secret: a sensitive name (``core.secrets.is_sensitive``:
password, secret, token, key, credential …) or one of :data:`SECRET_PARAMS` (``pwd``, ``sig``,
``X-Amz-Signature`` …). A value that is a whole secret reference is not a URI and is left alone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from airflow_tablemgmt.core.secrets import MASK, REFERENCE_RULE, is_sensitive, parse_reference

# scheme://[user[:password]@]host..., also jdbc:<sub>://...
_USERINFO = re.compile(
    r"^(?P<head>[A-Za-z][A-Za-z0-9+.-]*:(?:[A-Za-z0-9+.-]+:)*//)(?P<user>[^/?#@:;]*):(?P<pw>[^/?#@]*)@"
)
# Oracle's user/password@ after the driver type: jdbc:oracle:thin:u/PASSWORD@host:1521/db,
# jdbc:oracle:thin:u/PASSWORD@//host/svc, jdbc:oracle:oci:u/PASSWORD@(DESCRIPTION=...)
_ORACLE = re.compile(
    r"^(?P<head>jdbc:oracle:[A-Za-z0-9]+:)(?P<user>[^/@:;?#()\s]+)/(?P<pw>[^@]*)@(?=[^@]*$)", re.IGNORECASE
)
# A parameter after '?', '&', ';' or ':' (DB2's jdbc:db2://h:50000/db:user=u;password=p;)
_PARAM = re.compile(r"(?P<sep>[?&;:])(?P<key>[^=&;?#:/]+)=(?P<value>[^&;#]*)")
_LOOKS_LIKE_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
# A connection string of key=value pairs separated by ';' (ADO.NET / ODBC, Azure Storage's
# DefaultEndpointsProtocol=https;AccountName=a;AccountKey=...): no scheme, the pairs are the whole value.
_PAIRS = re.compile(r"^\s*[A-Za-z][A-Za-z0-9 _.-]*=[^;]*(?:;\s*[A-Za-z][A-Za-z0-9 _.-]*=[^;]*)+;?\s*$")

#: Parameter names that carry a secret in URIs and connection strings beyond the sensitive-name rule
#: (``core.secrets.is_sensitive``: password, secret, token, key, credential ...), compared without case,
#: '-', '_', '.' or spaces: ODBC's PWD, Snowflake's passcode, Azure's SAS signature (sig) and
#: SharedAccessSignature, every presigned URL's signature (X-Amz-Signature, X-Goog-Signature, Signature).
SECRET_PARAMS = frozenset(
    {
        "pwd",
        "pass",
        "passcode",
        "passwd",
        "sig",
        "sas",
        "sastoken",
        "sharedaccesssignature",
        "signature",
        "xamzsignature",
        "xgoogsignature",
        "xgoogcredential",
        "auth",
        "authtoken",
        "session",
        "sessionid",
        "cookie",
        "bearer",
    }
)
# ... and any name ending in one of these (X-Ms-Signature, OSSAccessKeySecret, client_assertion ...).
_SECRET_SUFFIXES = ("signature", "password", "passwd", "secret", "token", "assertion")


def is_secret_param(key: str) -> bool:
    """True if a URI or connection-string parameter named ``key`` carries a secret."""
    if is_sensitive(key):
        return True
    k = re.sub(r"[-_.\s]", "", key).lower()
    return k in SECRET_PARAMS or k.endswith(_SECRET_SUFFIXES)


def _params(value: str) -> tuple[str, bool]:
    """The text to find parameters in, and whether ``value`` is a connection string (pairs only)."""
    if _PAIRS.match(value) and not _LOOKS_LIKE_URI.match(value):
        return ";" + value, True
    return value, False


def uri_credential(value: Any) -> str | None:
    """What credential ``value`` carries, in words (never the credential), or None."""
    if not isinstance(value, str) or parse_reference(value) is not None:
        return None
    text, pairs = _params(value)
    if not pairs and not _LOOKS_LIKE_URI.match(value):
        return None
    if not pairs and _USERINFO.match(value):
        return "a password in its user-info ('user:password@')"
    if not pairs and _ORACLE.match(value):
        return "a password in Oracle's 'user/password@' form"
    for m in _PARAM.finditer(text):
        key = m.group("key").strip()
        if is_secret_param(key) and m.group("value").strip():
            return f"the parameter {key!r}"
    return None


def redact_uri(value: Any) -> Any:
    """``value`` with every credential :func:`uri_credential` finds replaced by ``***``."""
    if uri_credential(value) is None:
        return value
    text, pairs = _params(value)
    if not pairs:
        text = _USERINFO.sub(lambda m: f"{m.group('head')}{m.group('user')}:{MASK}@", text, count=1)
        text = _ORACLE.sub(lambda m: f"{m.group('head')}{m.group('user')}/{MASK}@", text, count=1)
    text = _PARAM.sub(
        lambda m: (
            f"{m.group('sep')}{m.group('key')}="
            f"{MASK if is_secret_param(m.group('key').strip()) else m.group('value')}"
        ),
        text,
    )
    return text[1:] if pairs else text


def redact_uris(properties: Mapping[str, Any]) -> dict[str, Any]:
    return {k: redact_uri(v) for k, v in properties.items()}


def check_uri_credentials(warehouse: Any, properties: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` naming the first field whose URI holds a credential, and what to do."""
    fields = [("warehouse", warehouse), *((f"properties.{k}", v) for k, v in properties.items())]
    for field, value in fields:
        found = uri_credential(value)
        if found is not None:
            raise ValueError(
                f"{field}: the URI holds a credential ({found}); it was not stored. Give the URI without it "
                f"and the credential as its own property holding {REFERENCE_RULE} — e.g. "
                "properties.jdbc.password: conn:my_catalog_db, s3.secret-access-key: env:AWS_SECRET_ACCESS_KEY"
            )
