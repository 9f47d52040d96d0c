"""The exception tree: drawn in the module's docstring, each error with its message and hint."""

from __future__ import annotations

import builtins
import pickle
import re

import pytest

import magnetic_core
from magnetic_core import errors
from magnetic_core.errors import (
    ClosedError,
    DimensionError,
    InvalidInputError,
    MagneticError,
    MissingDependencyError,
    PersistenceError,
    WrongTypeError,
)


def _drawn_tree() -> dict[str, tuple[str | None, list[str]]]:
    """Each class of the docstring's tree: its parent in the drawing and the builtins named."""
    parents: dict[str, tuple[str | None, list[str]]] = {}
    stack: list[str] = []
    for line in (errors.__doc__ or "").splitlines():
        found = re.match(r"^\s*((?:│   |    )*)(?:├── |└── )?([A-Z]\w+Error)\b(.*)$", line)
        if not found:
            continue
        depth = len(found.group(1)) // 4 + (1 if ("├" in line or "└" in line) else 0)
        name = found.group(2)
        del stack[depth:]
        also = re.findall(r"also (\w+)", found.group(3))
        parents[name] = (stack[-1] if stack else None, also)
        stack.append(name)
    return parents


def test_the_drawn_tree_is_the_class_tree():
    drawn = _drawn_tree()
    assert set(drawn) == set(errors.__all__)  # every error drawn, nothing else
    for name, (parent, also) in drawn.items():
        cls = getattr(errors, name)
        if parent is None:
            assert cls.__bases__ == (Exception,)
        else:
            assert cls.__bases__[0] is getattr(errors, parent), name
        for builtin in also:
            assert issubclass(cls, getattr(builtins, builtin)), name


@pytest.mark.parametrize("name", errors.__all__)
def test_every_error_is_a_magnetic_error_exported_at_the_top(name: str):
    cls = getattr(errors, name)
    assert issubclass(cls, MagneticError)
    assert getattr(magnetic_core, name, cls) is cls


def test_the_hint_is_appended_to_the_message():
    err = DimensionError("vector 3 has 5 values, expected 4", hint="embed with the same model")
    assert err.message == "vector 3 has 5 values, expected 4"
    assert err.hint == "embed with the same model"
    assert str(err) == "vector 3 has 5 values, expected 4 (hint: embed with the same model)"
    plain = ClosedError("the memory is closed")
    assert plain.hint is None and str(plain) == "the memory is closed"


def test_the_builtin_bases_let_framework_code_catch_them():
    with pytest.raises(ValueError):
        raise InvalidInputError("bad")
    with pytest.raises(TypeError):
        raise WrongTypeError("wrong type")
    with pytest.raises(ImportError):
        raise MissingDependencyError("pip install magnetic-storage[local]")
    assert not issubclass(PersistenceError, ValueError)  # a Chroma outage is no bad input


def test_the_hint_is_keyword_only():
    with pytest.raises(TypeError):
        MagneticError("message", "hint")  # type: ignore[misc]


@pytest.mark.parametrize("cls", [MagneticError, DimensionError, WrongTypeError, PersistenceError])
def test_an_error_survives_pickling_with_its_message(cls):
    # errors cross process boundaries (a worker pool, a subprocess's report)
    err = cls("what went wrong", hint="how to fix it")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is cls and str(back) == str(err)
