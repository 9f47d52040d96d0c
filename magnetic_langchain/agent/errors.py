"""Errors of the agent, personas and story; all are ``MagneticError`` subclasses.

::

    MagneticError
    ├── LLMError (magnetic_core._sleep.llm_json)
    │   ├── LLMUnavailableError          the model's server cannot be reached
    │   ├── ModelNotFoundError           the server does not have the model
    │   └── ToolsUnsupportedError        the model cannot call tools
    └── InvalidInputError
        └── PersonaError                 an unknown persona, or a bad name or text
"""

from __future__ import annotations

from magnetic_core._sleep.llm_json import LLMError, LLMUnavailableError
from magnetic_core.errors import InvalidInputError

__all__ = [
    "LLMError",
    "LLMUnavailableError",
    "ModelNotFoundError",
    "PersonaError",
    "ToolsUnsupportedError",
]


class ModelNotFoundError(LLMError):
    """The model server answers but does not have the requested model."""


class ToolsUnsupportedError(LLMError):
    """The chat model cannot call tools, which the memory agent needs."""


class PersonaError(InvalidInputError):
    """A persona that does not exist, or a name or prompt that cannot be stored."""
