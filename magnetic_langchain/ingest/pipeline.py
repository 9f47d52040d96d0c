"""``ingest(memory, source)``: files, folders and repositories into a memory, idempotently.

Every chunk carries the SHA-256 of its file, so a second run skips unchanged files, a
changed file has its chunks replaced (new ones written first, stale ones removed after)
and ``prune=True`` removes the chunks of files that are no longer there.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from magnetic_core import MagneticMemory
from magnetic_core.validators import check_int
from magnetic_langchain.ingest.chunking import chunk_file, detect_language
from magnetic_langchain.ingest.files import MISSING, read_file
from magnetic_langchain.ingest.sources import Source, describe, open_source

__all__ = ["IngestReport", "ingest"]

logger = logging.getLogger(__name__)


@dataclass
class IngestReport:
    """What one :func:`ingest` run did.

    Attributes:
        source: the path or URL ingested.
        kind: ``file``, ``folder`` or ``repository``.
        files_read: files chunked and stored (new or changed).
        files_unchanged: files skipped because their content hash was already stored.
        files_removed: files whose chunks ``prune`` removed.
        skipped: files not read, by reason (``binary``, ``too large``, ``symlink outside
            the root``, ...).
        chunks_added, chunks_updated, chunks_removed: cells written new, rewritten, deleted.
        seconds: wall time of the run.
    """

    source: str
    kind: str = ""
    files_read: int = 0
    files_unchanged: int = 0
    files_removed: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    chunks_added: int = 0
    chunks_updated: int = 0
    chunks_removed: int = 0
    seconds: float = 0.0

    @property
    def changed(self) -> bool:
        """Whether the run changed the memory at all."""
        return bool(self.chunks_added or self.chunks_updated or self.chunks_removed)


@dataclass
class _Stored:
    hashes: set[str] = field(default_factory=set)
    ids: set[str] = field(default_factory=set)
    expected: int = -1

    @property
    def complete(self) -> bool:
        return len(self.hashes) == 1 and len(self.ids) == self.expected


def _stored_files(memory: MagneticMemory, key: str) -> dict[str, _Stored]:
    files: dict[str, _Stored] = {}
    for cell in memory.get(filter={"ingest_root": key}):
        meta = cell.metadata
        entry = files.setdefault(str(meta.get("path")), _Stored())
        entry.hashes.add(str(meta.get("file_hash")))
        entry.ids.add(cell.id)
        entry.expected = int(meta.get("chunks", -1))
    return files


def _chunk_id(key: str, path: str, index: int) -> str:
    root = hashlib.sha1(key.encode(), usedforsecurity=False).hexdigest()[:12]
    return f"{root}:{path}#{index}"


@dataclass
class _Batch:
    ids: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    metas: list[dict[str, Any]] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    existing: int = 0


class _Run:
    """One ingestion: reads files, queues their chunks and writes them in batches."""

    def __init__(self, memory: MagneticMemory, source: Source, report: IngestReport, **opts: Any):
        self.memory, self.source, self.report = memory, source, report
        self.chunk_size: int = opts["chunk_size"]
        self.max_bytes: int = opts["max_file_size"]
        self.batch_size: int = opts["batch_size"]
        self.stored = _stored_files(memory, source.key)
        self.present: set[str] = set()
        self.batch = _Batch()
        self.common = describe(source)

    def file(self, rel: str) -> None:
        read = read_file(self.source.root, rel, self.max_bytes)
        if read.skipped == MISSING:
            return
        if read.skipped:
            self.report.skipped[read.skipped] += 1
            return
        self.present.add(rel)
        digest = hashlib.sha256(read.data).hexdigest()
        old = self.stored.get(rel)
        if old is not None and old.complete and old.hashes == {digest}:
            self.report.files_unchanged += 1
            return
        self._queue(rel, read.text, digest, old)
        if len(self.batch.ids) >= self.batch_size:
            self.flush()

    def _queue(self, rel: str, text: str, digest: str, old: _Stored | None) -> None:
        language, _ = detect_language(rel)
        chunks = [c for c in chunk_file(rel, text, self.chunk_size) if c.text.strip()]
        ids = [_chunk_id(self.source.key, rel, i) for i in range(len(chunks))]
        previous = old.ids if old is not None else set()
        batch = self.batch
        for i, chunk in enumerate(chunks):
            meta = {
                **self.common,
                "source": rel,
                "path": rel,
                "line_start": chunk.start_line,
                "line_end": chunk.end_line,
                "language": language,
                "file_hash": digest,
                "chunk": i,
                "chunks": len(chunks),
            }
            if chunk.section:
                meta["section"] = chunk.section
            batch.ids.append(ids[i])
            # The path leads the text, so it is embedded and indexed as an entity.
            batch.texts.append(f"{rel}\n{chunk.text}")
            batch.metas.append(meta)
        batch.existing += len(previous.intersection(ids))
        batch.stale += sorted(previous.difference(ids))
        self.report.files_read += 1

    def flush(self) -> None:
        batch, self.batch = self.batch, _Batch()
        if batch.ids:
            self.memory.add(batch.texts, metadatas=batch.metas, ids=batch.ids)
        if batch.stale:  # only after the new chunks are stored
            self.memory.delete(ids=batch.stale)
        self.report.chunks_updated += batch.existing
        self.report.chunks_added += len(batch.ids) - batch.existing
        self.report.chunks_removed += len(batch.stale)

    def prune(self) -> None:
        gone = [p for p in self.stored if self.source.covers(p) and p not in self.present]
        ids = [cid for p in gone for cid in self.stored[p].ids]
        if ids:
            self.report.chunks_removed += self.memory.delete(ids=ids)
        self.report.files_removed += len(gone)


def ingest(
    memory: MagneticMemory,
    source: str,
    *,
    chunk_size: int = 1500,
    max_file_size: int = 1_000_000,
    prune: bool = False,
    batch_size: int = 128,
    progress: bool = False,
) -> IngestReport:
    """Ingest a file, a folder, a local git repository or a git URL into ``memory``.

    Args:
        memory: the memory to write to.
        source: a path or a git URL (https, ssh, git, file, or ``user@host:path``).
        chunk_size: the largest chunk, in characters.
        max_file_size: files larger than this many bytes are skipped.
        prune: remove the chunks of files (under ``source``) that are no longer there.
        batch_size: chunks embedded and written per call to the memory.
        progress: draw a progress bar on stderr.

    Returns:
        What was read, skipped, added, updated and removed.

    Raises:
        SourceError: an unreadable path or a URL that is not a repository.
        GitError: ``git`` is missing (URLs) or failed.

    Example:
        >>> import tempfile, pathlib
        >>> from magnetic_core import HashingEmbedder, MagneticMemory
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (folder / "deploy.sh").write_text("#!/bin/sh\\nrsync -a build/ web:/srv\\n")
        >>> with MagneticMemory(path=tempfile.mkdtemp(), embedder=HashingEmbedder()) as mem:
        ...     first, again = ingest(mem, str(folder)), ingest(mem, str(folder))
        >>> first.files_read, first.chunks_added, again.files_unchanged, again.changed
        (1, 1, 1, False)
    """
    # Long for its docstring (arguments and a runnable example); the body is short.
    check_int(chunk_size, "chunk_size", low=50)
    check_int(max_file_size, "max_file_size", low=1)
    check_int(batch_size, "batch_size", low=1)
    started = time.perf_counter()
    report = IngestReport(source)
    with open_source(source) as src:
        report.kind = src.kind
        sizes = {"chunk_size": chunk_size, "max_file_size": max_file_size}
        run = _Run(memory, src, report, batch_size=batch_size, **sizes)
        _each_file(run, src, progress)
        run.flush()
        if prune:
            run.prune()
    report.seconds = time.perf_counter() - started
    logger.info("ingested %s: %s", source, report)
    return report


def _each_file(run: _Run, src: Source, progress: bool) -> None:
    from tqdm import tqdm

    with tqdm(
        src.files, desc=src.repo or src.root.name, unit="file", disable=not progress, leave=False
    ) as bar:
        for rel in bar:
            run.file(rel)
            bar.set_postfix(
                chunks=len(run.batch.ids) + run.report.chunks_added + run.report.chunks_updated,
                refresh=False,
            )
