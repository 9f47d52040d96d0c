"""The core's argument checks: each accepts what it promises and names what it refuses."""

from __future__ import annotations

import math

import pydantic
import pytest

from magnetic_core.errors import InvalidInputError, MagneticError, MetadataError, WrongTypeError
from magnetic_core.validators import (
    MAX_DEPTH,
    check_id_list,
    check_int,
    check_nested,
    check_number,
    check_utf8,
    field_error,
)


@pytest.mark.parametrize(("value", "low"), [(0, 0), (5, 1), (10**20, 3), (-2, -5)])
def test_check_int_returns_good_integers(value, low):
    assert check_int(value, "k", low=low) is value


@pytest.mark.parametrize("value", [True, False, 2.0, 2.5, "3", None, math.nan, -1, [1]])
def test_check_int_refuses_bools_floats_strings_and_values_under_the_bound(value):
    with pytest.raises(InvalidInputError) as info:
        check_int(value, "config.n_probe")
    err = info.value
    assert f"config.n_probe must be an integer >= 0, got {value!r}" in str(err)
    assert err.hint == "pass n_probe=<integer >= 0>"  # the hint names the argument, not the path


def test_check_int_optional_and_error_class():
    assert check_int(None, "k", optional=True) is None
    with pytest.raises(WrongTypeError):
        check_int("x", "k", error=WrongTypeError)
    with pytest.raises(InvalidInputError):
        check_int(None, "k")


@pytest.mark.parametrize("value", [0, 0.5, -1.0, 1, 1e-300])
def test_check_number_returns_finite_numbers_in_range(value):
    assert check_number(value, "w", low=-1.0, high=1.0) == value


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, True, "0.5", None, 1.0001, -2])
def test_check_number_refuses_nan_inf_bools_strings_and_out_of_range(value):
    with pytest.raises(InvalidInputError, match=r"w must be a number in \[-1.0, 1.0\]") as info:
        check_number(value, "w", low=-1.0, high=1.0)
    assert "w=<number between -1.0 and 1.0>" in (info.value.hint or "")


def test_check_number_without_bounds_still_refuses_infinity():
    assert check_number(-1e308, "x") == -1e308
    assert check_number(None, "x", optional=True) is None
    with pytest.raises(InvalidInputError):
        check_number(math.inf, "x")


@pytest.mark.parametrize("ids", [["a"], ("a", "b"), [], iter(["a"])])
def test_check_id_list_takes_lists_and_leaves_iterators_unconsumed(ids):
    check_id_list(ids)
    if not isinstance(ids, (list, tuple)):
        assert list(ids) == ["a"]


@pytest.mark.parametrize("ids", ["abc", b"abc"])
def test_check_id_list_refuses_a_bare_string(ids):
    with pytest.raises(InvalidInputError, match="one (str|bytes)") as info:
        check_id_list(ids, "delete ids")
    assert str(info.value).startswith("delete ids must be a list of strings")
    assert repr([ids]) in (info.value.hint or "")


def test_check_utf8_names_the_position_of_a_lone_surrogate():
    assert check_utf8("héllo ✓", "text") == "héllo ✓"
    with pytest.raises(InvalidInputError, match="position 3") as info:
        check_utf8("abc\ud800def", "texts[2]")
    assert "texts[2]" in str(info.value) and info.value.__cause__ is None


def _nested(depth: int) -> object:
    value: object = "leaf"
    for i in range(depth - 1):
        value = {"k": value} if i % 2 else [value]
    return value


def test_check_nested_accepts_the_documented_depth_and_refuses_one_more():
    check_nested(_nested(MAX_DEPTH + 1), "meta")  # MAX_DEPTH containers around a leaf
    with pytest.raises(InvalidInputError, match=f"more than {MAX_DEPTH} levels"):
        check_nested(_nested(MAX_DEPTH + 2), "meta")


def test_check_nested_refuses_very_deep_values_without_recursion():
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(MetadataError, match="nested more than 3 levels"):
        check_nested(deep, "metadata", limit=3, error=MetadataError)


def test_check_nested_finds_surrogates_in_values_and_keys():
    check_nested({"a": [1, 2.5, None, ("x", {"y": True})]}, "m")
    with pytest.raises(MetadataError, match="m holds"):
        check_nested({"a": ["ok", "bad\udfff"]}, "m", error=MetadataError)
    with pytest.raises(InvalidInputError, match="a key of m"):
        check_nested({"k\ud800": 1}, "m")


class Model(pydantic.BaseModel):
    k: int = pydantic.Field(ge=0)
    name: str = "x"
    probe: int = 1

    @pydantic.field_validator("probe")
    @classmethod
    def _probe(cls, value: int) -> int:
        return check_int(value, "probe", low=1)


def _errors(**fields) -> list:
    with pytest.raises(pydantic.ValidationError) as info:
        Model(**fields)
    return info.value.errors()


def test_field_error_names_the_field_the_value_and_the_bound():
    err = field_error("Retriever", _errors(k=-1))
    assert type(err) is InvalidInputError
    assert str(err).startswith("Retriever got k=-1: input should be greater than or equal to 0")
    assert err.hint == "pass k=<a value >= 0>"


def test_field_error_of_a_wrong_type_is_a_wrong_type_error():
    err = field_error("Retriever", _errors(k="many", name=3))
    assert isinstance(err, WrongTypeError) and isinstance(err, TypeError)
    assert "k='many'" in str(err) and "(and 1 more)" in str(err)
    assert err.hint == "pass k=<an integer>"


def test_field_error_hands_back_our_own_validators_error():
    err = field_error("Retriever", _errors(probe=0))
    assert str(err).startswith("probe must be an integer >= 1, got 0")


def test_field_error_of_a_missing_field_and_of_no_field():
    class Needs(pydantic.BaseModel):
        x: int

    with pytest.raises(pydantic.ValidationError) as info:
        Needs()
    assert field_error("Needs", info.value.errors()).hint == "pass x=<a value: it is required>"
    bare = field_error("Thing", [])
    assert isinstance(bare, MagneticError) and str(bare).startswith("Thing: a value is not")


def test_long_values_are_shortened_in_the_message():
    err = field_error("R", _errors(k="y" * 500))
    assert "..." in str(err) and len(str(err)) < 200
