"""The ingestion library: chunk boundaries and line ranges per file type, the safe file
reader, and ``ingest()`` called from Python."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from magnetic_core import HashingEmbedder, InvalidInputError, MagneticMemory
from magnetic_langchain.ingest import SourceError, chunk_file, detect_language, ingest
from magnetic_langchain.ingest.files import read_file

PYTHON = """import os


def first():
    return 1


class Second:
    def method(self):
        return 2


def third():
    return 3
"""


def _lines_of(text: str, start: int, end: int) -> str:
    return "\n".join(text.splitlines()[start - 1 : end]).strip()


@pytest.mark.parametrize(
    "path, language, how",
    [
        ("src/app.py", "python", "code"),
        ("web/index.tsx", "ts", "code"),
        ("main.go", "go", "code"),
        ("README.md", "markdown", "markdown"),
        ("notes.txt", "text", "text"),
        ("LICENSE", "text", "text"),
        ("deploy.sh", "shell", "lines"),
        ("Dockerfile", "dockerfile", "lines"),
        ("config/app.yaml", "yaml", "lines"),
    ],
)
def test_languages_are_detected_from_the_path(path, language, how):
    assert detect_language(path) == (language, how)


def test_code_is_split_at_definitions_with_exact_line_ranges():
    chunks = chunk_file("mod.py", PYTHON, chunk_size=60)
    starts = [c.text.split("\n", 1)[0] for c in chunks]
    assert len(chunks) >= 3
    # Every chunk opens at a definition (or the imports), none cuts one in half.
    assert set(starts) <= {"import os", "def first():", "class Second:", "def third():"}
    assert "class Second:" in starts and "def third():" in starts
    for c in chunks:
        assert c.text == _lines_of(PYTHON, c.start_line, c.end_line)


def test_markdown_is_split_at_headings_outside_code_fences():
    text = (
        "# Guide\n\nIntro.\n\n## Setup\n\n```sh\n# a comment, not a heading\nmake\n```\n\n"
        "## Use\n\nRun it.\n"
    )
    chunks = chunk_file("guide.md", text, chunk_size=500)
    assert [c.section for c in chunks] == ["Guide", "Guide > Setup", "Guide > Use"]
    assert "# a comment, not a heading" in chunks[1].text
    for c in chunks:
        assert c.text == _lines_of(text, c.start_line, c.end_line)


def test_a_long_markdown_section_is_split_further_and_keeps_its_section():
    body = "\n\n".join(f"Paragraph {i} " + "word " * 40 for i in range(10))
    chunks = chunk_file("long.md", f"# Title\n\n## Part\n\n{body}\n", chunk_size=400)
    assert len(chunks) > 3 and all(len(c.text) <= 400 for c in chunks)
    assert {c.section for c in chunks} == {"Title > Part"}


def test_text_is_split_at_paragraphs():
    text = "First paragraph here.\n\nSecond paragraph here.\n\nThird one.\n"
    chunks = chunk_file("notes.txt", text, chunk_size=30)
    assert [(c.start_line, c.end_line) for c in chunks] == [(1, 1), (3, 3), (5, 5)]


def test_the_reader_skips_what_it_must_not_read(tmp_path: Path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "ok.txt").write_text("hello\n")
    (root / "bin.dat").write_bytes(b"abc\x00def")
    (root / "latin.txt").write_bytes("caf\xe9".encode("latin-1"))
    (root / "big.txt").write_text("x" * 200)
    (root / "empty.txt").write_text("  \n")
    (tmp_path / "outside.txt").write_text("secret")
    (root / "out").symlink_to(tmp_path / "outside.txt")
    (root / "in").symlink_to(root / "ok.txt")
    reasons = {
        name: read_file(root, name, max_bytes=100).skipped
        for name in ("ok.txt", "bin.dat", "latin.txt", "big.txt", "empty.txt", "out", "in", "gone")
    }
    assert reasons == {
        "ok.txt": None,
        "bin.dat": "binary",
        "latin.txt": "not UTF-8 text",
        "big.txt": "too large",
        "empty.txt": "empty",
        "out": "symlink outside the root",
        "in": "symlink",
        "gone": "missing",
    }
    assert read_file(root, "ok.txt", 100).text == "hello\n"


@pytest.fixture
def memory(tmp_path: Path):
    with MagneticMemory(path=str(tmp_path / "store"), embedder=HashingEmbedder()) as mem:
        yield mem


def test_ingest_from_python_is_idempotent_and_prunes(memory: MagneticMemory, tmp_path: Path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nalpha\n")
    (folder / "b.txt").write_text("bravo\n")
    first = ingest(memory, str(folder))
    assert (first.kind, first.files_read, first.chunks_added) == ("folder", 2, 2)
    assert not ingest(memory, str(folder)).changed
    (folder / "b.txt").unlink()
    kept = ingest(memory, str(folder))
    assert kept.files_removed == 0 and memory.count() == 2
    pruned = ingest(memory, str(folder), prune=True)
    assert (pruned.files_removed, pruned.chunks_removed, memory.count()) == (1, 1, 1)


def test_ingesting_one_file_prunes_nothing_else(memory: MagneticMemory, tmp_path: Path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("alpha\n")
    (folder / "b.txt").write_text("bravo\n")
    ingest(memory, str(folder))
    report = ingest(memory, str(folder / "a.txt"), prune=True)
    assert (report.kind, report.files_unchanged, report.files_removed) == ("file", 1, 0)
    assert memory.count() == 2


def test_bad_arguments_and_sources(memory: MagneticMemory, tmp_path: Path):
    with pytest.raises(InvalidInputError, match="chunk_size"):
        ingest(memory, str(tmp_path), chunk_size=0)
    with pytest.raises(SourceError, match="no such file"):
        ingest(memory, str(tmp_path / "nope"))
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(SourceError, match="not a regular file"):
        ingest(memory, str(fifo))
