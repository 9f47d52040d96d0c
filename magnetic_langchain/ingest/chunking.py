"""Cutting a file into chunks by its type, with LangChain's text splitters.

Code is split at definitions where langchain-text-splitters has a splitter for the
language (classes and functions first), other code and configuration by lines, Markdown by
headings (a large section further at its paragraphs), and text by paragraphs. Every chunk
keeps its exact line range in the file.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from langchain_text_splitters import Language, RecursiveCharacterTextSplitter

__all__ = ["Chunk", "chunk_file", "detect_language"]

# Extensions whose language has a definition-aware splitter.
_CODE = {
    ".py": Language.PYTHON,
    ".pyi": Language.PYTHON,
    ".js": Language.JS,
    ".mjs": Language.JS,
    ".cjs": Language.JS,
    ".jsx": Language.JS,
    ".ts": Language.TS,
    ".tsx": Language.TS,
    ".go": Language.GO,
    ".rs": Language.RUST,
    ".java": Language.JAVA,
    ".kt": Language.KOTLIN,
    ".kts": Language.KOTLIN,
    ".scala": Language.SCALA,
    ".swift": Language.SWIFT,
    ".rb": Language.RUBY,
    ".php": Language.PHP,
    ".c": Language.C,
    ".h": Language.C,
    ".cc": Language.CPP,
    ".cpp": Language.CPP,
    ".cxx": Language.CPP,
    ".hpp": Language.CPP,
    ".cs": Language.CSHARP,
    ".lua": Language.LUA,
    ".pl": Language.PERL,
    ".pm": Language.PERL,
    ".hs": Language.HASKELL,
    ".ex": Language.ELIXIR,
    ".exs": Language.ELIXIR,
    ".ps1": Language.POWERSHELL,
    ".sol": Language.SOL,
    ".proto": Language.PROTO,
    ".r": Language.R,
    ".tex": Language.LATEX,
    ".html": Language.HTML,
    ".htm": Language.HTML,
    ".rst": Language.RST,
    ".cob": Language.COBOL,
    ".vb": Language.VISUALBASIC6,
}
_MARKDOWN = {".md", ".markdown", ".mdx"}
_TEXT = {".txt", ".text", ""}
# Named files and extensions of line-oriented code and configuration.
_LINES_BY_NAME = {"dockerfile": "dockerfile", "makefile": "makefile", "jenkinsfile": "groovy"}
_LINES = {
    ".sh": "shell",
    ".bash": "shell",
    ".zsh": "shell",
    ".fish": "shell",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".toml": "toml",
    ".json": "json",
    ".ini": "ini",
    ".cfg": "ini",
    ".conf": "conf",
    ".sql": "sql",
    ".css": "css",
    ".scss": "scss",
    ".xml": "xml",
    ".csv": "csv",
    ".tsv": "tsv",
    ".mk": "makefile",
    ".gradle": "groovy",
    ".env": "dotenv",
    ".properties": "properties",
    ".tf": "terraform",
    ".vue": "vue",
    ".svelte": "svelte",
}
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")


@dataclass(frozen=True)
class Chunk:
    """A piece of a file: its text and 1-based, inclusive line range."""

    text: str
    start_line: int
    end_line: int
    section: str | None = None


def detect_language(path: str) -> tuple[str, str]:
    """``(language, how it is split)`` for a path; how is code, lines, markdown or text."""
    name = PurePosixPath(path).name.lower()
    suffix = PurePosixPath(name).suffix
    if suffix in _CODE:
        return _CODE[suffix].value, "code"
    if suffix in _MARKDOWN:
        return "markdown", "markdown"
    if name in _LINES_BY_NAME:
        return _LINES_BY_NAME[name], "lines"
    if suffix in _LINES:
        return _LINES[suffix], "lines"
    return "text", "text" if suffix in _TEXT else "lines"


def _splitter(how: str, language: str, size: int) -> RecursiveCharacterTextSplitter:
    if how == "code":
        return RecursiveCharacterTextSplitter.from_language(
            Language(language), chunk_size=size, chunk_overlap=0
        )
    if how == "markdown":
        return RecursiveCharacterTextSplitter.from_language(
            Language.MARKDOWN, chunk_size=size, chunk_overlap=0
        )
    separators = ["\n\n", "\n", " ", ""] if how == "text" else ["\n\n", "\n", ""]
    return RecursiveCharacterTextSplitter(separators=separators, chunk_size=size, chunk_overlap=0)


class _Lines:
    """Character offset to 1-based line number."""

    def __init__(self, text: str) -> None:
        self._starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def at(self, offset: int) -> int:
        return bisect.bisect_right(self._starts, offset)


def _locate(
    pieces: list[str], text: str, base: int, lines: _Lines, section: str | None
) -> list[Chunk]:
    chunks, cursor = [], 0
    for piece in pieces:
        start = text.find(piece, cursor)
        start = cursor if start < 0 else start
        cursor = start + len(piece)
        first = lines.at(base + start)
        chunks.append(Chunk(piece, first, first + piece.count("\n"), section))
    return chunks


def _sections(text: str) -> list[tuple[int, str, str | None]]:
    """Markdown split at headings outside code fences: ``(offset, text, "H1 > H2")``."""
    found: list[tuple[int, str | None]] = [(0, None)]
    trail: list[tuple[int, str]] = []
    offset, fenced = 0, False
    for line in text.splitlines(keepends=True):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and (m := _HEADING.match(line)):
            level = len(m.group(1))
            trail = [(lv, t) for lv, t in trail if lv < level] + [(level, m.group(2))]
            found.append((offset, " > ".join(t for _, t in trail)))
        offset += len(line)
    bounds = [o for o, _ in found] + [len(text)]
    sections = [(o, text[o : bounds[i + 1]], s) for i, (o, s) in enumerate(found)]
    # A heading directly followed by a deeper heading stays with the section it opens.
    merged: list[tuple[int, str, str | None]] = []
    for offset, body, section in sections:
        if merged and not _HEADING.sub("", merged[-1][1]).strip():
            offset, body = merged[-1][0], merged.pop()[1] + body
        if body.strip():
            merged.append((offset, body, section))
    return merged


def chunk_file(path: str, text: str, chunk_size: int = 1500) -> list[Chunk]:
    """Chunks of ``text`` (the contents of ``path``) at boundaries that suit its type.

    Example:
        >>> code = "import os\\n\\ndef f():\\n    return 1\\n"
        >>> [(c.start_line, c.end_line) for c in chunk_file("a.py", code, 24)]
        [(1, 1), (3, 4)]
    """
    language, how = detect_language(path)
    splitter = _splitter(how, language, chunk_size)
    lines = _Lines(text)
    if how != "markdown":
        return _locate(splitter.split_text(text), text, 0, lines, None)
    chunks: list[Chunk] = []
    for offset, body, section in _sections(text):
        pieces = [body.strip()] if len(body) <= chunk_size else splitter.split_text(body)
        chunks += _locate([p for p in pieces if p], body, offset, lines, section)
    return chunks
