"""MemoryConfig validation and the exception tree."""

from __future__ import annotations

import pytest

from magnetic_core import errors
from magnetic_core.config import MemoryConfig


def test_defaults_are_valid_and_frozen():
    config = MemoryConfig()
    assert config.join_threshold is None
    with pytest.raises(AttributeError):
        config.n_probe = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    "field, value",
    [
        ("join_threshold", 1.5),
        ("join_threshold", float("nan")),
        ("n_probe", 0),
        ("n_probe", 2.5),
        ("max_group_size", 1),
        ("calibration_percentile", 120),
        ("entity_boost", -0.1),
        ("chunk_size", True),
    ],
)
def test_bad_settings_name_the_field(field, value):
    with pytest.raises(errors.InvalidInputError, match=field):
        MemoryConfig(**{field: value})


def test_config_is_keyword_only():
    with pytest.raises(TypeError):
        MemoryConfig(0.5)  # type: ignore[misc]


def test_with_changes_validates_again():
    assert MemoryConfig().with_changes(n_probe=4).n_probe == 4
    with pytest.raises(errors.InvalidInputError):
        MemoryConfig().with_changes(n_probe=-1)


def test_errors_carry_hints_and_share_one_root():
    err = errors.DimensionError("vector has dimension 3", hint="embed with the same model")
    assert isinstance(err, errors.MagneticError)
    assert isinstance(err, ValueError)
    assert "hint: embed with the same model" in str(err)
    assert err.hint == "embed with the same model"
    assert issubclass(errors.MissingDependencyError, ImportError)
    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.MagneticError)
