"""Credentials inside a URI: refused when a catalog is written, redacted when one is shown.

A catalog's ``warehouse``, its ``uri`` and any other URI-valued property are shown to every user who
may read catalogs (``GET /catalogs``, ``tablemgmt catalogs``), so a secret inside one —
``jdbc:postgresql://pg/cat?user=u&password=S3CRET``, ``http://u:pw@host``, ``s3a://AK:SK@bucket``,
``jdbc:sqlserver://h;password=x`` — would be shown to all of them. Such a value is refused on write
(the YAML file, REST, the CLI, the store), with how to pass the secret instead: a separate property
holding a reference (``conn:``, ``var:``, ``env:``, resolved on the worker). A row written before this
rule still loads (its jobs keep working) but is shown redacted.

What counts: a password in the user-info (``user:password@``; a user name alone is not a secret) and
a query or ``;``-parameter whose name is sensitive (``core.secrets.is_sensitive``: password, secret,
token, key, credential …). A value that is a whole secret reference is not a URI and is left alone.
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
_PARAM = re.compile(r"(?P<sep>[?&;])(?P<key>[^=&;?#]+)=(?P<value>[^&;#]*)")
_LOOKS_LIKE_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def uri_credential(value: Any) -> str | None:
    """What credential ``value`` carries, in words (never the credential), or None."""
    if not isinstance(value, str) or parse_reference(value) is not None or not _LOOKS_LIKE_URI.match(value):
        return None
    if _USERINFO.match(value):
        return "a password in its user-info ('user:password@')"
    for m in _PARAM.finditer(value):
        key = m.group("key").strip()
        if is_sensitive(key) and m.group("value"):
            return f"the parameter {key!r}"
    return None


def redact_uri(value: Any) -> Any:
    """``value`` with every credential :func:`uri_credential` finds replaced by ``***``."""
    if uri_credential(value) is None:
        return value
    text = _USERINFO.sub(lambda m: f"{m.group('head')}{m.group('user')}:{MASK}@", value, count=1)
    return _PARAM.sub(
        lambda m: (
            f"{m.group('sep')}{m.group('key')}={MASK if is_sensitive(m.group('key').strip()) else m.group('value')}"
        ),
        text,
    )


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
