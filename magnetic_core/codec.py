"""Exact round trip of user metadata through Chroma, which holds only flat scalars.

User metadata is stored as one JSON string under a reserved key. JSON cannot tell a tuple
from a list or hold dates, so those are tagged; anything else that JSON cannot hold (sets,
objects, NaN) is refused up front with a clear error rather than silently changed.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Mapping
from typing import Any

from magnetic_core.errors import MetadataError

__all__ = [
    "RESERVED_PREFIX",
    "decode_metadata",
    "encode_metadata",
    "metadata_from_json",
    "metadata_to_json",
    "validate_metadata",
]

RESERVED_PREFIX = "_mag_"
_TAG = "__mag_type__"


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
    try:
        _encode_value(dict(metadata), f"metadata {position}")
    except RecursionError as e:
        raise MetadataError(f"metadata {position} is nested too deeply") from e
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


def encode_metadata(metadata: Mapping[str, Any]) -> str:
    """One JSON string holding ``metadata`` exactly."""
    return json.dumps(_encode_value(dict(metadata), "metadata"), ensure_ascii=False)


def decode_metadata(blob: str | None) -> dict[str, Any]:
    """Inverse of :func:`encode_metadata`."""
    if not blob:
        return {}
    decoded = _decode_value(json.loads(blob))
    return decoded if isinstance(decoded, dict) else {}
