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
from collections.abc import Mapping, Sequence
from typing import Any

from magnetic_core.errors import InvalidInputError, WrongTypeError

__all__ = [
    "MAX_DEPTH",
    "check_id_list",
    "check_int",
    "check_nested",
    "check_number",
    "check_utf8",
    "field_error",
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


_TYPE_WORDS = {
    "int": "an integer",
    "float": "a number",
    "string": "a string",
    "str": "a string",
    "bool": "True or False",
    "dict": "a dict",
    "list": "a list",
}
_BOUNDS = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}


def field_error(owner: str, errors: Sequence[Mapping[str, Any]]) -> InvalidInputError:
    """One clear error for the field errors a framework's pydantic model reported.

    The frameworks' classes (a LangChain retriever, a LlamaIndex memory block) are pydantic
    models, and pydantic reports a bad field as its own ``ValidationError``. The adapters
    catch it and raise this instead, so a user mistake is a :class:`MagneticError` here as
    everywhere: an error of one of our own validators (which pydantic wraps) comes back as
    it was raised; any other names the field, the value and what it takes.

    Args:
        owner: the class or call that was given the fields, e.g. ``"MagneticRetriever"``.
        errors: pydantic's ``ValidationError.errors()`` (dicts with ``loc``, ``msg``,
            ``type``, ``input`` and ``ctx``); the core does not import pydantic.

    Example:
        >>> err = field_error("Retriever", [{"loc": ("k",), "msg": "Input should be "
        ...     "greater than or equal to 0", "type": "greater_than_equal", "input": -1,
        ...     "ctx": {"ge": 0}}])
        >>> print(err)
        Retriever got k=-1: input should be greater than or equal to 0 (hint: pass k=<a value >= 0>)
    """
    for err in errors:
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, InvalidInputError):
            return cause
    first: Mapping[str, Any] = errors[0] if errors else {}
    kind = str(first.get("type", ""))
    message = str(first.get("msg", "a value is not accepted")).removeprefix("Value error, ")
    message = message[:1].lower() + message[1:]
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    wrong_type = kind.endswith(("_type", "_parsing", "instance_of"))
    error = WrongTypeError if wrong_type else InvalidInputError
    field = ".".join(str(part) for part in first.get("loc", ()))
    if not field:
        return error(
            f"{owner}: {message}{more}", hint=f"check the arguments {owner} takes in its docs"
        )
    shown = repr(first.get("input"))
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return error(
        f"{owner} got {field}={shown}: {message}{more}",
        hint=f"pass {field}=<{_expected(kind, first.get('ctx') or {})}>",
    )


def _expected(kind: str, ctx: Mapping[str, Any]) -> str:
    """What a field takes, in words, from pydantic's error type and context."""
    if kind == "missing":
        return "a value: it is required"
    if kind == "is_instance_of" and "class" in ctx:
        return f"a {ctx['class']}"
    bounds = [f"{_BOUNDS[b]} {ctx[b]}" for b in _BOUNDS if b in ctx]
    if bounds:
        return "a value " + " and ".join(bounds)
    word = _TYPE_WORDS.get(kind.split("_", 1)[0])
    return word if word is not None else "a valid value"
