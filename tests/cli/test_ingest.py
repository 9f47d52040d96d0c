"""`magnetic ingest` on a real git repository: read, skipped, re-read, changed and pruned."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.cli.conftest import APP_PY, InProcess, Magnetic, git, no_git_path

STORE = ("--path", "store", "--embedder", "hashing")


def _export(cli: InProcess, *extra: str) -> list[dict[str, Any]]:
    out = cli.ok(*STORE, *extra, "export").out
    return [json.loads(line) for line in out.splitlines()]


def _by_path(cells: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    files: dict[str, list[dict[str, Any]]] = {}
    for cell in cells:
        files.setdefault(cell["metadata"]["path"], []).append(cell)
    return files


def test_a_repository_is_ingested_with_its_metadata_and_skips(
    magnetic: Magnetic, cli: InProcess, repo: Path
):
    result = magnetic.ok(*STORE, "ingest", str(repo))
    assert "5 files read" in result.out
    assert "skipped 3 files: 1 binary, 1 symlink outside the root, 1 too large" in result.out

    cells = _export(cli)
    files = _by_path(cells)
    # .gitignore'd files never arrive; the symlink's target is not read.
    assert set(files) == {".gitignore", "app.py", "docs/guide.md", "scripts/deploy.sh", "notes.txt"}
    assert not any("TOPSECRET" in c["text"] for c in cells)
    head = git(repo, "rev-parse", "HEAD")
    for cell in cells:
        meta = cell["metadata"]
        assert meta["repo"] == "atlas" and meta["commit"] == head
        # The stored line range is exactly where the chunk sits in the file.
        lines = (repo / meta["path"]).read_text().splitlines()
        body = cell["text"].split("\n", 1)[1]
        assert body == "\n".join(lines[meta["line_start"] - 1 : meta["line_end"]]).strip()
    assert {c["metadata"]["language"] for c in files["app.py"]} == {"python"}
    assert {c["metadata"]["language"] for c in files["scripts/deploy.sh"]} == {"shell"}
    sections = [c["metadata"].get("section") for c in files["docs/guide.md"]]
    assert sections == ["Atlas guide", "Atlas guide > Deploy", "Atlas guide > Monitoring"]

    # File names route through the entity index.
    hits = cli.ok(*STORE, "search", "where is deploy.sh configured?", "--json", "--explain")
    top = hits.json()[:2]
    assert {h["metadata"]["path"] for h in top} == {"scripts/deploy.sh", "docs/guide.md"}
    assert all("entity" in h["route"]["stages"] for h in top)


def test_reingest_is_a_no_op_then_changes_replace_and_prune_removes(
    magnetic: Magnetic, cli: InProcess, repo: Path
):
    magnetic.ok(*STORE, "ingest", str(repo))
    before = {c["id"]: c for c in _export(cli)}

    again = magnetic.ok(*STORE, "ingest", str(repo))
    assert "0 files read, 5 unchanged" in again.out and "(nothing changed)" in again.out
    assert {c["id"]: c for c in _export(cli)} == before  # not even rewritten

    # app.py grows a second definition block; notes.txt is deleted.
    (repo / "app.py").write_text(APP_PY + "\n\ndef stop():\n    return 0\n" * 40)
    (repo / "notes.txt").unlink()
    git(repo, "commit", "-qam", "second")
    changed = magnetic.ok(*STORE, "ingest", str(repo), "--chunk-size", "300")
    assert "1 file read, 3 unchanged" in changed.out
    files = _by_path(_export(cli))
    new_head = git(repo, "rev-parse", "HEAD")
    assert len(files["app.py"]) > 1
    assert {c["metadata"]["commit"] for c in files["app.py"]} == {new_head}
    assert sorted(c["metadata"]["chunk"] for c in files["app.py"]) == list(
        range(len(files["app.py"]))
    )
    assert "notes.txt" in files  # still there: removal needs --prune

    pruned = magnetic.ok(*STORE, "ingest", str(repo), "--prune")
    assert "1 file pruned" in pruned.out and "1 removed" in pruned.out
    files = _by_path(_export(cli))
    assert "notes.txt" not in files and "app.py" in files

    # Fewer chunks after a change: the leftovers are removed, none are duplicated.
    (repo / "app.py").write_text(APP_PY)
    shrunk = magnetic.ok(*STORE, "ingest", str(repo))
    assert "updated" in shrunk.out
    assert len(_by_path(_export(cli))["app.py"]) == 1


def test_a_git_url_is_cloned_shallowly_and_removed_afterwards(
    magnetic: Magnetic, cli: InProcess, repo: Path
):
    url = repo.as_uri()  # file:// — a real clone, no network needed
    result = magnetic.ok(*STORE, "--namespace", "cloned", "ingest", url)
    assert "(repository): 5 files read" in result.out
    cells = _export(cli, "--namespace", "cloned")
    assert {c["metadata"]["repo"] for c in cells} == {"atlas"}
    assert {c["metadata"]["commit"] for c in cells} == {git(repo, "rev-parse", "HEAD")}
    assert {c["metadata"]["ingest_root"] for c in cells} == {url}
    assert list(magnetic.tmp.iterdir()) == []  # the clone is gone
    assert "unchanged" in magnetic.ok(*STORE, "--namespace", "cloned", "ingest", url).out


def test_a_plain_folder_honours_gitignore_files(cli: InProcess, tmp_path: Path):
    magnetic = cli
    folder = tmp_path / "notes"
    (folder / "drafts").mkdir(parents=True)
    (folder / ".gitignore").write_text("*.tmp\ndrafts/\n!keep.tmp\n")
    (folder / "a.md").write_text("# A\n\nkeep me\n")
    (folder / "b.tmp").write_text("scratch\n")
    (folder / "keep.tmp").write_text("kept by a negated pattern\n")
    (folder / "drafts" / "c.md").write_text("# C\n\ndraft\n")
    (folder / "sub").mkdir()
    (folder / "sub" / ".gitignore").write_text("secret.md\n")
    (folder / "sub" / "secret.md").write_text("hidden\n")
    (folder / "sub" / "open.md").write_text("# Open\n\nvisible\n")
    result = magnetic.ok(*STORE, "ingest", str(folder))
    assert "(folder)" in result.out
    paths = set(_by_path(_export(cli)))
    assert paths == {".gitignore", "a.md", "keep.tmp", "sub/.gitignore", "sub/open.md"}


def test_bad_sources_are_one_line_errors(
    magnetic: Magnetic, cli: InProcess, tmp_path: Path, repo: Path
):
    not_a_repo = tmp_path / "plain"
    not_a_repo.mkdir()
    result = magnetic(*STORE, "ingest", not_a_repo.as_uri())  # a real process: no traceback
    assert result.code == 2 and "cannot clone file://" in result.error_line
    result = cli(*STORE, "ingest", str(tmp_path / "missing"))
    assert result.code == 2 and "no such file or directory" in result.error_line

    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0)
    try:
        result = cli(*STORE, "ingest", str(locked))
        if result.code != 0:  # root reads anything: then there is nothing to refuse
            assert "permission denied" in result.error_line
    finally:
        locked.chmod(0o700)

    no_git = {"PATH": no_git_path(tmp_path)}
    result = magnetic(*STORE, "ingest", repo.as_uri(), env=no_git)
    assert result.code == 1 and "git is not installed" in result.error_line
    # A local repository can still be read without git, as a folder honouring .gitignore.
    result = magnetic(*STORE, "ingest", str(repo), env=no_git)
    assert result.code == 0 and "(folder): 5 files read" in result.out

    # One bad source among good ones: reported, the rest ingested, exit 1.
    result = cli(*STORE, "--namespace", "mixed", "ingest", str(tmp_path / "missing"), str(repo))
    assert result.code == 1 and "no such file" in result.err and "5 files read" in result.out
