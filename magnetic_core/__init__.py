"""MagneticStorage core: a hierarchical (groups over cells) memory store on ChromaDB."""

from __future__ import annotations

# First: it stamps numba's cache of the kernels compiled later (see the module).
from magnetic_core import _kernel_cache  # noqa: F401  # isort: skip
from magnetic_core._sleep.plan import SleepConfig
from magnetic_core.config import MemoryConfig
from magnetic_core.embeddings import (
    Embedder,
    HashingEmbedder,
    OllamaEmbedder,
    SentenceTransformerEmbedder,
    default_embedder,
)
from magnetic_core.errors import (
    ClosedError,
    DimensionError,
    DuplicateIdError,
    EmbedderMismatchError,
    EmbeddingError,
    EmptyTextError,
    FilterError,
    InvalidInputError,
    InvalidVectorError,
    MagneticError,
    MetadataError,
    MissingDependencyError,
    PersistenceError,
    WrongTypeError,
)
from magnetic_core.filters import compile_filter
from magnetic_core.memory import MagneticMemory
from magnetic_core.types import (
    Cell,
    CompactionReport,
    GroupInfo,
    Hit,
    MergePlan,
    Route,
    SleepReport,
    Stats,
)

__version__ = "0.1.0"

__all__ = [
    "Cell",
    "ClosedError",
    "CompactionReport",
    "DimensionError",
    "DuplicateIdError",
    "Embedder",
    "EmbedderMismatchError",
    "EmbeddingError",
    "EmptyTextError",
    "FilterError",
    "GroupInfo",
    "HashingEmbedder",
    "Hit",
    "InvalidInputError",
    "InvalidVectorError",
    "MagneticError",
    "MagneticMemory",
    "MemoryConfig",
    "MergePlan",
    "MetadataError",
    "MissingDependencyError",
    "OllamaEmbedder",
    "PersistenceError",
    "Route",
    "SentenceTransformerEmbedder",
    "SleepConfig",
    "SleepReport",
    "Stats",
    "WrongTypeError",
    "__version__",
    "compile_filter",
    "default_embedder",
]
