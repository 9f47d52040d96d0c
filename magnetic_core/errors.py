"""The exception tree of MagneticStorage: every error carries its context and a hint.

::

    MagneticError
    ├── InvalidInputError (also ValueError)   bad arguments; nothing was changed
    │   ├── EmptyTextError                     a text is empty or whitespace only
    │   ├── DimensionError                     a vector has the wrong length
    │   ├── InvalidVectorError                 a vector holds NaN/inf or is all zeros
    │   ├── DuplicateIdError                   one id given twice in one call
    │   ├── MetadataError                      metadata that cannot be stored
    │   ├── FilterError                        an unknown operator or malformed filter
    │   └── WrongTypeError (also TypeError)    an argument of the wrong type
    ├── EmbeddingError                         an embedder failed or returned bad vectors
    ├── EmbedderMismatchError                  a store opened with another embedder
    ├── PersistenceError                       the Chroma substrate failed
    │   └── CorruptRecordError                 a stored row cannot be read (skipped on open)
    ├── MissingDependencyError (also ImportError)  an optional extra is not installed
    └── ClosedError                            the memory was used after close()
"""

from __future__ import annotations

__all__ = [
    "ClosedError",
    "CorruptRecordError",
    "DimensionError",
    "DuplicateIdError",
    "EmbedderMismatchError",
    "EmbeddingError",
    "EmptyTextError",
    "FilterError",
    "InvalidInputError",
    "InvalidVectorError",
    "MagneticError",
    "MetadataError",
    "MissingDependencyError",
    "PersistenceError",
    "WrongTypeError",
]


class MagneticError(Exception):
    """Base class of every error MagneticStorage raises on purpose.

    Args:
        message: what went wrong, naming the offending value.
        hint: how to fix it; appended to the message.
    """

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(f"{message} (hint: {hint})" if hint else message)


class InvalidInputError(MagneticError, ValueError):
    """The caller passed something the store cannot accept; the store is unchanged."""


class EmptyTextError(InvalidInputError):
    """A text to store or search is empty or only whitespace."""


class DimensionError(InvalidInputError):
    """A vector's length differs from the store's embedding dimension."""


class InvalidVectorError(InvalidInputError):
    """A vector contains NaN or infinity, or has zero norm."""


class DuplicateIdError(InvalidInputError):
    """The same id appears more than once in one call."""


class MetadataError(InvalidInputError):
    """Metadata that cannot be stored or round-tripped exactly."""


class FilterError(InvalidInputError):
    """A metadata filter with an unknown operator or a malformed shape."""


class WrongTypeError(InvalidInputError, TypeError):
    """An argument of the wrong type (an unknown keyword, a string for a list, ...).

    Also a ``TypeError``, so code written against the frameworks' own checks still catches it.
    """


class EmbeddingError(MagneticError):
    """An embedder raised, or returned vectors of the wrong shape or with NaN/zero rows."""


class EmbedderMismatchError(MagneticError):
    """The store was created with a different embedder name or dimension."""


class PersistenceError(MagneticError):
    """Reading from or writing to the Chroma substrate failed."""


class CorruptRecordError(PersistenceError):
    """A stored cell row cannot be decoded; opening a store logs and skips such rows."""


class MissingDependencyError(MagneticError, ImportError):
    """An optional dependency is needed for this feature but is not installed."""


class ClosedError(MagneticError):
    """The memory was used after ``close()``."""
