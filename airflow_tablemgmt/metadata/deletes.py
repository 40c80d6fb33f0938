"""An Iceberg snapshot's delete files told apart: v2 position delete files, equality delete files and v3
deletion vectors, read from the manifests without a JVM.

A table of format version 3 records a merge-on-read delete as a *deletion vector* (DV): a bitmap of the
deleted row positions of one data file, stored as a ``deletion-vector-v1`` blob in a Puffin file (one
Puffin file may hold the vectors of many data files). Its manifest entry is a position-delete entry
(``content`` 1) whose ``file_format`` is ``PUFFIN``, with ``referenced_data_file`` (the one data file it
applies to), ``content_offset`` and ``content_size_in_bytes`` (where its blob sits in the Puffin file), and a
``record_count`` that is the number of rows it marks deleted. A data file has at most one vector: a later
delete merges into it. (Iceberg's table spec, "Deletion Vectors"; Iceberg's snapshot summary counts them as
``added-dvs`` / ``removed-dvs``, apart from ``added-position-delete-files``, while ``added-delete-files``
counts both.) So do we: :class:`DeleteCounts` keeps the three kinds apart, and the total of delete entries
counts every kind, vectors included.

pyiceberg 0.12 reads manifests with its format-version-2 read schema (``ManifestFile.fetch_manifest_entry``),
which drops the v3 fields; :func:`live_entries` reads them with the v3 schema instead, a superset whose new
fields are optional, so a v1 or v2 manifest reads the same with those fields ``None``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.manifest import DataFile, ManifestFile

# DataFileContent values of the Iceberg spec (pyiceberg.manifest.DataFileContent).
DATA, POSITION_DELETES, EQUALITY_DELETES = 0, 1, 2
PUFFIN = "PUFFIN"
_V3_FIELDS = ("referenced_data_file", "content_offset", "content_size_in_bytes")


def live_entries(io: FileIO, manifests: Iterable[ManifestFile]) -> Iterator[DataFile]:
    """The live (not deleted) files the ``manifests`` list, data and delete files alike, with the v3 fields
    (:func:`dv_fields`) read where the manifest has them."""
    from pyiceberg.avro.file import AvroFile
    from pyiceberg.manifest import (
        MANIFEST_ENTRY_SCHEMAS,
        DataFile,
        DataFileContent,
        FileFormat,
        ManifestEntry,
        ManifestEntryStatus,
    )

    schema = MANIFEST_ENTRY_SCHEMAS[3]
    for manifest in manifests:
        with AvroFile[ManifestEntry](
            io.new_input(manifest.manifest_path),
            schema,
            read_types={-1: ManifestEntry, 2: DataFile},
            read_enums={0: ManifestEntryStatus, 101: FileFormat, 134: DataFileContent},
        ) as reader:
            for entry in reader:
                if entry.status == ManifestEntryStatus.DELETED:
                    continue
                data_file = entry.data_file
                data_file.spec_id = manifest.partition_spec_id  # not stored in the file: the manifest's
                yield data_file


def _v3_positions() -> dict[str, int]:
    from pyiceberg.manifest import DATA_FILE_TYPE

    names = [f.name for f in DATA_FILE_TYPE[3].fields]
    return {name: names.index(name) for name in _V3_FIELDS}


_POSITIONS: dict[str, int] = {}


def dv_fields(f: Any) -> dict[str, Any]:
    """``referenced_data_file``, ``content_offset`` and ``content_size_in_bytes`` of a file
    :func:`live_entries` read (``None`` each where the manifest lacks them)."""
    if not _POSITIONS:
        _POSITIONS.update(_v3_positions())
    data = getattr(f, "_data", None)
    if data is None:  # a stand-in with attributes (tests)
        return {name: getattr(f, name, None) for name in _V3_FIELDS}
    return {name: data[i] if i < len(data) else None for name, i in _POSITIONS.items()}


def file_format(f: Any) -> str:
    fmt = f.file_format
    return str(getattr(fmt, "value", fmt)).upper()


def is_deletion_vector(f: Any) -> bool:
    """A v3 deletion vector: a position-delete entry stored in a Puffin file."""
    return int(f.content) == POSITION_DELETES and file_format(f) == PUFFIN


@dataclass
class DeleteCounts:
    """The live delete entries of a snapshot, by kind, and the rows each kind marks deleted.

    ``delete_bytes`` counts every delete file once: a Puffin file that holds several vectors once, at its
    size. ``dv_bytes`` is the vectors' own blobs (``content_size_in_bytes``)."""

    position_delete_files: int = 0
    position_deleted_rows: int = 0
    equality_delete_files: int = 0
    equality_delete_rows: int = 0  # rows of the equality delete files (each may delete many data rows)
    deletion_vectors: int = 0
    dv_deleted_rows: int = 0
    dv_bytes: int = 0
    delete_bytes: int = 0
    _puffin_files: set[str] = field(default_factory=set)

    def add(self, f: Any) -> None:
        """Count one live delete entry (``content`` 1 or 2)."""
        rows, size = int(f.record_count), int(f.file_size_in_bytes)
        if is_deletion_vector(f):
            self.deletion_vectors += 1
            self.dv_deleted_rows += rows
            self.dv_bytes += int(dv_fields(f)["content_size_in_bytes"] or 0)
            if f.file_path not in self._puffin_files:
                self._puffin_files.add(f.file_path)
                self.delete_bytes += size
            return
        self.delete_bytes += size
        if int(f.content) == EQUALITY_DELETES:
            self.equality_delete_files += 1
            self.equality_delete_rows += rows
        else:
            self.position_delete_files += 1
            self.position_deleted_rows += rows

    @property
    def delete_files(self) -> int:
        """Every live delete entry: position and equality delete files and deletion vectors."""
        return self.position_delete_files + self.equality_delete_files + self.deletion_vectors

    @property
    def dv_files(self) -> int:
        """The Puffin files that hold the deletion vectors."""
        return len(self._puffin_files)

    @property
    def deleted_rows(self) -> int:
        """Rows the delete entries mark deleted, as their ``record_count`` says (an equality delete's rows
        are its keys, each of which may delete several rows: a lower bound)."""
        return self.position_deleted_rows + self.equality_delete_rows + self.dv_deleted_rows


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def in_words(delete_files: int, position: int, equality: int, vectors: int) -> str:
    """``delete_files`` (every delete entry) in words, its kinds apart: "3 position delete files and 12
    deletion vectors". Figures measured before the kinds were counted apart say "N delete files"."""
    parts = [
        _count(position, "position delete file", "position delete files") if position else "",
        _count(equality, "equality delete file", "equality delete files") if equality else "",
        _count(vectors, "deletion vector", "deletion vectors") if vectors else "",
    ]
    other = delete_files - position - equality - vectors
    if other > 0:
        parts.append(_count(other, "delete file", "delete files"))
    said = [p for p in parts if p]
    if not said:
        return "no delete files"
    return said[0] if len(said) == 1 else ", ".join(said[:-1]) + " and " + said[-1]
