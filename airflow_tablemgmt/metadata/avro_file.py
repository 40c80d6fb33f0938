"""The records of an Avro object container file, read without a JVM or an Avro library.

Hudi 1.x writes its timeline's metadata (a completed commit's ``HoodieCommitMetadata``, its plans) as Avro
container files with the writer's schema in the header (``TimelineMetadataUtils.serializeAvroMetadata``:
Avro's ``DataFileWriter``, no codec). Recovery reads one field of them (the commit's extra metadata,
``lifecycle/table_marks.py``), so this decodes the generic data model the schema describes (records as
dicts, maps, arrays, unions, enums as their symbol) for the ``null`` and ``deflate`` codecs, and nothing
more (no schema resolution, no logical types). The format: https://avro.apache.org/docs/1.11.1/specification/
"""

from __future__ import annotations

import io
import json
import struct
import zlib
from typing import Any

MAGIC = b"Obj\x01"


class AvroError(ValueError):
    """Not an Avro container file this reader understands."""


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.buf = io.BytesIO(data)

    def read(self, n: int) -> bytes:
        out = self.buf.read(n)
        if len(out) != n:
            raise AvroError("truncated Avro data")
        return out

    def long(self) -> int:
        shift = result = 0
        while True:
            b = self.read(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return (result >> 1) ^ -(result & 1)
            shift += 7
            if shift > 70:
                raise AvroError("an Avro varint longer than 10 bytes")

    def bytes_(self) -> bytes:
        return self.read(self.long())

    def at_end(self) -> bool:
        return self.buf.tell() >= len(self.buf.getbuffer())


def _blocks(r: _Reader, item: Any) -> list[Any]:
    """Items of an array or map: blocks of ``count`` items (negative: followed by the block's size)."""
    out: list[Any] = []
    while True:
        count = r.long()
        if count == 0:
            return out
        if count < 0:
            count = -count
            r.long()
        out.extend(item() for _ in range(count))


def _decode(r: _Reader, schema: Any, named: dict[str, Any], space: str = "") -> Any:
    if isinstance(schema, list):  # a union: the branch's index first
        return _decode(r, schema[r.long()], named, space)
    if isinstance(schema, str):
        kind = schema
        if kind not in _PRIMITIVE:
            full = kind if "." in kind or not space else f"{space}.{kind}"
            target = named.get(full, named.get(kind))
            if target is None:
                raise AvroError(f"unknown Avro type {kind!r}")
            return _decode(r, target, named, space)
        schema = {"type": kind}
    kind = schema["type"]
    if isinstance(kind, (list, dict)) or (isinstance(kind, str) and kind in named):
        return _decode(r, kind, named, space)
    if kind in ("record", "error", "enum", "fixed"):
        name = schema["name"]
        space = schema.get("namespace", space) if "." not in name else name.rsplit(".", 1)[0]
        named.setdefault(name if "." in name else f"{space}.{name}" if space else name, schema)
        named.setdefault(name.rsplit(".", 1)[-1], schema)
    if kind in ("record", "error"):
        return {f["name"]: _decode(r, f["type"], named, space) for f in schema["fields"]}
    if kind == "enum":
        return schema["symbols"][r.long()]
    if kind == "fixed":
        return r.read(int(schema["size"]))
    if kind == "array":
        return _blocks(r, lambda: _decode(r, schema["items"], named, space))
    if kind == "map":
        pairs = _blocks(r, lambda: (r.bytes_().decode(), _decode(r, schema["values"], named, space)))
        return dict(pairs)
    return _PRIMITIVE[kind](r)


_PRIMITIVE: dict[str, Any] = {
    "null": lambda r: None,
    "boolean": lambda r: r.read(1) != b"\x00",
    "int": _Reader.long,
    "long": _Reader.long,
    "float": lambda r: struct.unpack("<f", r.read(4))[0],
    "double": lambda r: struct.unpack("<d", r.read(8))[0],
    "bytes": _Reader.bytes_,
    "string": lambda r: r.bytes_().decode("utf-8"),
}


def is_avro(data: bytes) -> bool:
    return data[:4] == MAGIC


def records(data: bytes) -> list[Any]:
    """Every record of the container file ``data``; raises :class:`AvroError` for anything else."""
    if not is_avro(data):
        raise AvroError("not an Avro container file (no 'Obj\\x01' magic)")
    r = _Reader(data)
    r.read(4)
    meta = dict(_blocks(r, lambda: (r.bytes_().decode(), r.bytes_())))
    sync = r.read(16)
    try:
        schema = json.loads(meta["avro.schema"])
    except (KeyError, ValueError) as e:
        raise AvroError(f"the file's header has no readable schema ({e})") from None
    codec = meta.get("avro.codec", b"null").decode()
    if codec not in ("null", "deflate"):
        raise AvroError(f"codec {codec!r} is not read here (null and deflate are)")
    out: list[Any] = []
    while not r.at_end():
        count = r.long()
        block = r.bytes_()
        if codec == "deflate":
            block = zlib.decompress(block, -15)
        inner = _Reader(block)
        out.extend(_decode(inner, schema, {}) for _ in range(count))
        if r.read(16) != sync:
            raise AvroError("a block does not end with the file's sync marker")
    return out
