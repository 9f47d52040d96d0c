"""The core's argument checks, written once: each raises an error naming the argument.

Every layer that takes values from a user (``MemoryConfig``, ``MagneticMemory``'s calls,
the embedders, the adapters) checks them with these functions, so "a positive integer"
refuses ``True`` and ``2.5`` everywhere, a bare string is never taken for a list of ids,
and a nested value is refused at the same documented depth, :data:`MAX_DEPTH`.

Example:
    >>> check_int(4, "n_probe", low=1)
    4
    >>> check_int(True, "k")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    magnetic_core.errors.InvalidInputError: k must be an integer >= 0, got True (hint: ...)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from magnetic_core.errors import InvalidInputError

__all__ = [
    "MAX_DEPTH",
    "check_id_list",
    "check_int",
    "check_nested",
    "check_number",
    "check_utf8",
]

MAX_DEPTH = 32
"""Deepest nesting accepted in metadata values and in filters (a flat dict is depth 1)."""


def check_int(
    value: Any,
    name: str,
    *,
    low: int = 0,
    optional: bool = False,
    error: type[InvalidInputError] = InvalidInputError,
) -> Any:
    """``value`` if it is an int (not a bool) of at least ``low`` (or None when ``optional``).

    Raises:
        InvalidInputError: naming ``name``, the bound and the value (or ``error``).
    """
    if value is None and optional:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise error(
            f"{name} must be an integer >= {low}, got {value!r}",
            hint=f"pass {name.rsplit('.', 1)[-1]}=<integer >= {low}>",
        )
    return value


def check_number(
    value: Any,
    name: str,
    *,
    low: float = -math.inf,
    high: float = math.inf,
    optional: bool = False,
) -> Any:
    """``value`` if it is a finite int or float (not a bool) in ``[low, high]``.

    Raises:
        InvalidInputError: naming ``name``, the range and the value.
    """
    if value is None and optional:
        return None
    if (
        not isinstance(value, (int, float))
        or isinstance(value, bool)
        or not math.isfinite(value)
        or not low <= value <= high
    ):
        short = name.rsplit(".", 1)[-1]
        raise InvalidInputError(
            f"{name} must be a number in [{low}, {high}], got {value!r}",
            hint=f"pass {short}=<number between {low} and {high}>",
        )
    return value


def check_id_list(value: Any, name: str = "ids") -> None:
    """Refuse a bare string (or bytes) where a list of ids is expected.

    ``"abc"`` is a sequence of three one-letter ids to Python; to the caller it is one id.
    The value itself is not consumed, so a generator stays usable.
    """
    if isinstance(value, (str, bytes)):
        raise InvalidInputError(
            f"{name} must be a list of strings, got one {type(value).__name__}: {value!r}",
            hint=f"wrap it: [{value!r}]",
        )


def check_utf8(value: str, name: str) -> str:
    """``value`` if it can be stored as UTF-8 (no lone surrogates such as ``"\\ud800"``).

    Raises:
        InvalidInputError: naming ``name`` and the position of the bad character.
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidInputError(
            f"{name} holds the lone surrogate {value[e.start]!r} at position {e.start}, "
            "which is not valid Unicode text and cannot be stored",
            hint="remove it, or decode the source with errors='replace'",
        ) from None
    return value


def check_nested(
    value: Any,
    name: str,
    *,
    limit: int = MAX_DEPTH,
    error: type[InvalidInputError] = InvalidInputError,
) -> None:
    """Refuse nesting deeper than ``limit`` and lone surrogates in any string or key.

    Walks dicts, lists and tuples without recursion, so a value nested 100 000 levels
    deep is refused as clearly as one nested 33 levels deep.

    Raises:
        InvalidInputError: naming ``name`` and the limit (or ``error``).
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            _check_text(item, name, error)
            continue
        if isinstance(item, Mapping):
            children: Any = item.values()
            for key in item:
                if isinstance(key, str):
                    _check_text(key, f"a key of {name}", error)
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth > limit:
            raise error(
                f"{name} is nested more than {limit} levels deep",
                hint=f"flatten it: at most {limit} levels of dicts and lists are accepted",
            )
        stack.extend((child, depth + 1) for child in children)


def _check_text(value: str, name: str, error: type[InvalidInputError]) -> None:
    try:
        check_utf8(value, name)
    except InvalidInputError as e:
        raise error(e.message, hint=e.hint) from None
