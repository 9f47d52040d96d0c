"""Ingestion of files, folders and git repositories into a memory, chunked by file type.

>>> from magnetic_langchain.ingest import ingest  # doctest: +SKIP
>>> report = ingest(memory, "https://github.com/org/repo.git", prune=True)  # doctest: +SKIP
"""

from __future__ import annotations

from magnetic_langchain.ingest.chunking import Chunk, chunk_file, detect_language
from magnetic_langchain.ingest.pipeline import IngestReport, ingest
from magnetic_langchain.ingest.sources import GitError, Source, SourceError, open_source

__all__ = [
    "Chunk",
    "GitError",
    "IngestReport",
    "Source",
    "SourceError",
    "chunk_file",
    "detect_language",
    "ingest",
    "open_source",
]
