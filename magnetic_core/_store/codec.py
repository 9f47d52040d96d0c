"""Exact round trip of user metadata through Chroma, which holds only flat scalars.

User metadata is stored as one JSON string under a reserved key. JSON cannot tell a tuple
from a list or hold dates, so those are tagged; anything else that JSON cannot hold (sets,
objects, NaN) is refused up front with a clear error rather than silently changed, and so
is nesting deeper than :data:`~magnetic_core.validators.MAX_DEPTH` levels.

Reading is the other way round and never trusts what is stored: :func:`decode_record`
turns one stored row record into checked fields, or raises :class:`CorruptRecordError`
naming the cell, whatever the row holds (malformed JSON, wrong types, nesting no decoder
can follow), so the loader can report and skip that row.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Mapping
from typing import Any

from magnetic_core.errors import CorruptRecordError, MetadataError
from magnetic_core.validators import check_nested

__all__ = [
    "RESERVED_PREFIX",
    "decode_record",
    "metadata_from_json",
    "metadata_to_json",
    "validate_metadata",
]

RESERVED_PREFIX = "_mag_"
_TAG = "__mag_type__"
# Deepest stored metadata that is decoded: tags double the levels of tuples, and records
# written before nesting was bounded may be deeper still; anything deeper is skipped.
_READ_DEPTH = 200
# Schema 2 rows use long field names (and hold every field).
_SCHEMA_2 = {
    "group": "g",
    "seq": "s",
    "created": "c",
    "updated": "u",
    "entities": "e",
    "meta": "m",
    "links": "l",
}


def validate_metadata(metadata: Any, position: int) -> dict[str, Any]:
    """Return a plain dict copy of one cell's metadata, or raise naming what is wrong."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise MetadataError(
            f"metadata {position} must be a dict, got {type(metadata).__name__}",
            hint="pass one dict (or None) per text",
        )
    for key in metadata:
        if not isinstance(key, str):
            raise MetadataError(f"metadata {position}: key {key!r} is not a string")
        if key.startswith(RESERVED_PREFIX):
            raise MetadataError(
                f"metadata {position}: key {key!r} uses the reserved prefix {RESERVED_PREFIX!r}",
                hint="rename the key",
            )
    check_nested(metadata, f"metadata {position}", error=MetadataError)
    _encode_value(dict(metadata), f"metadata {position}")
    return dict(metadata)


def _encode_value(value: Any, where: str) -> Any:
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise MetadataError(
                f"{where}: {value!r} cannot be stored", hint="use None or a finite number"
            )
        return value
    if isinstance(value, list):
        return [_encode_value(v, where) for v in value]
    if isinstance(value, tuple):
        return {_TAG: "tuple", "items": [_encode_value(v, where) for v in value]}
    if isinstance(value, dt.datetime):
        return {_TAG: "datetime", "iso": value.isoformat()}
    if isinstance(value, dt.date):
        return {_TAG: "date", "iso": value.isoformat()}
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise MetadataError(f"{where}: nested key {k!r} is not a string")
            out[k] = _encode_value(v, where)
        if _TAG in out:
            out = {_TAG: "dict", "items": out}
        return out
    raise MetadataError(
        f"{where}: value {value!r} of type {type(value).__name__} cannot be stored",
        hint="use str, int, float, bool, None, lists, tuples, dicts, date or datetime",
    )


def _decode_value(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode_value(v) for v in value]
    if isinstance(value, dict):
        tag = value.get(_TAG)
        if tag == "tuple":
            return tuple(_decode_value(v) for v in value["items"])
        if tag == "datetime":
            return dt.datetime.fromisoformat(value["iso"])
        if tag == "date":
            return dt.date.fromisoformat(value["iso"])
        if tag == "dict":
            return {k: _decode_value(v) for k, v in value["items"].items()}
        return {k: _decode_value(v) for k, v in value.items()}
    return value


def metadata_to_json(metadata: Mapping[str, Any]) -> Any:
    """``metadata`` as a JSON-ready value (tuples and dates tagged)."""
    return _encode_value(dict(metadata), "metadata")


def metadata_from_json(value: Any) -> dict[str, Any]:
    """Inverse of :func:`metadata_to_json`."""
    decoded = _decode_value(value)
    return decoded if isinstance(decoded, dict) else {}


def decode_record(cid: str, raw: Any) -> dict[str, Any]:
    """The checked fields of one stored cell record (the JSON string under the row key).

    Returns a dict with ``g`` (group id), ``s`` (sequence number), ``c`` and ``u``
    (created and updated times), ``e`` (entities, a tuple), ``m`` (the user's metadata,
    decoded) and ``l`` (contradiction links, a tuple of dicts). Schema 2 records (long
    field names) are read too.

    Raises:
        CorruptRecordError: whatever is wrong with the record, naming the cell.
    """
    try:
        return _decode_record(raw)
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as e:
        raise CorruptRecordError(
            f"stored cell {cid!r} cannot be read ({type(e).__name__}: {e})",
            hint="the row is left in Chroma untouched; re-add the cell to replace it",
        ) from None


def _decode_record(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, str):
        raise TypeError("the row holds no record written by magnetic-storage")
    record = json.loads(raw)
    if not isinstance(record, dict):
        raise TypeError(f"the record is a JSON {type(record).__name__}, not an object")
    if "group" in record:
        record = {short: record[long] for long, short in _SCHEMA_2.items() if long in record}
    created = _finite(record["c"])
    entities, links, meta = record.get("e", []), record.get("l", []), record.get("m", {})
    if not isinstance(entities, list) or not all(isinstance(e, str) for e in entities):
        raise TypeError("entities must be a list of strings")
    if not isinstance(links, list) or not all(isinstance(x, dict) for x in links):
        raise TypeError("contradiction links must be a list of objects")
    if not isinstance(meta, dict):
        raise TypeError("metadata must be an object")
    check_nested(meta, "the metadata", limit=_READ_DEPTH)
    seq = record["s"]
    if not isinstance(seq, int) or isinstance(seq, bool):
        raise TypeError(f"the sequence number {seq!r} is not an integer")
    return {
        "g": _text(record["g"], "the group id"),
        "s": seq,
        "c": created,
        "u": _finite(record.get("u", created)),
        "e": tuple(entities),
        "m": metadata_from_json(meta),
        "l": tuple(links),
    }


def _finite(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TypeError(f"the timestamp {value!r} is not a finite number")
    return float(value)


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise TypeError(f"{what} {value!r} is not a non-empty string")
    return value
