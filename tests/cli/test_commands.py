"""search, groups, get, export, stats, forget and add as a user runs them, and the mistakes
that used to be silent or print a traceback."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from magnetic_langchain.cli import main, sample_memories
from tests.cli.conftest import InProcess, Magnetic
from tests.conftest import ChromaServer

STORE = ("--path", "mem", "--embedder", "hashing")
TOPICS = [
    f"{word} notes number {i} about {word} and more {word}"
    for i, word in enumerate(
        "apples bridges comets deserts engines forests glaciers harbors islands jungles kites "
        "lakes meteors nebulas oceans pyramids quasars rivers summits tundras volcanoes "
        "waterfalls xylophones yachts zebras".split()
    )
]


GROUP_ROW = re.compile(r"g\d+(-[0-9a-f]+)?\s")  # a group id: g<n>, or g<n>-<writer>


@pytest.fixture
def many_groups(cli: InProcess) -> InProcess:
    """A store of 25 unrelated memories, each its own group (join threshold 0.99)."""
    cli.ok(*STORE, "--threshold", "0.99", "add", *TOPICS, "--metadata", '{"kind": "topic"}')
    return cli


def test_groups_are_paged_and_every_group_can_be_listed(many_groups: InProcess):
    first = many_groups.ok(*STORE, "groups").out
    assert first.startswith("25 concept groups over 25 cells")
    rows = [line for line in first.splitlines() if GROUP_ROW.match(line)]
    assert len(rows) == 20
    assert "showing groups 1-20 of 25; --page 2 for more" in first
    second = many_groups.ok(*STORE, "groups", "--page", "2").out
    assert len([line for line in second.splitlines() if GROUP_ROW.match(line)]) == 5
    everything = many_groups.ok(*STORE, "groups", "--all", "--json").json()
    assert len(everything) == 25 and all(g["size"] == 1 for g in everything)
    assert "1 cell," in many_groups.ok(*STORE, "groups", "--tree", "--limit", "1").out


def test_one_group_one_memory_and_an_export(many_groups: InProcess):
    hits = many_groups.ok(*STORE, "search", "comets", "-k", "1", "--json").json()
    gid, cid = hits[0]["group"], hits[0]["id"]
    shown = many_groups.ok(*STORE, "groups", "--show", gid).out
    assert f"group {gid}:" in shown and cid in shown and "comets notes" in shown

    got = many_groups.ok(*STORE, "get", cid).out
    assert f"id        {cid}" in got and '"kind": "topic"' in got and "comets notes" in got
    record = many_groups.ok(*STORE, "get", cid, "--json").json()[0]
    assert record["metadata"] == {"kind": "topic"} and record["group"] == gid

    lines = many_groups.ok(*STORE, "export", "--format", "jsonl").out.splitlines()
    exported = [json.loads(line) for line in lines]
    assert len(exported) == 25
    assert {e["text"] for e in exported} == set(TOPICS)
    assert all(e["metadata"] == {"kind": "topic"} and e["group"] and e["label"] for e in exported)

    many_groups.ok(*STORE, "export", "--output", "all.json", "--format", "json")
    assert len(json.loads((many_groups.cwd / "all.json").read_text())) == 25


def test_search_scores_are_the_cosine_and_json_keeps_the_route(many_groups: InProcess):
    table = many_groups.ok(*STORE, "search", "comets notes", "-k", "3").out
    assert table.splitlines()[0].split() == ["score", "group", "text"]
    assert "score = cosine similarity" in table
    explained = many_groups.ok(*STORE, "search", "comets notes", "-k", "3", "--explain", "--json")
    hits = explained.json()
    assert len(hits) == 3
    first_scores = [float(line.split()[0]) for line in table.splitlines()[1:4]]
    assert first_scores == [round(h["score"], 3) for h in hits]
    assert all(-1 <= h["score"] <= 1 and h["route"]["stages"] for h in hits)
    assert any(h["rank_score"] > h["score"] for h in hits)  # the fused score is not shown as score
    empty = many_groups.ok(*STORE, "search", "comets", "--filter", '{"kind": "other"}')
    assert "no results: no memory matches --filter" in empty.out


def test_stats_are_readable_and_json(many_groups: InProcess):
    text = many_groups.ok(*STORE, "stats").out
    assert re.search(r"cells\s+25 in 25 groups", text)
    assert re.search(r"threshold\s+0\.990 \(configured\)", text)
    data = many_groups.ok(*STORE, "stats", "--json").json()
    assert data["count"] == 25 and data["singleton_groups"] == 25


def test_compact_gives_back_the_space_of_forgotten_memories(many_groups: InProcess):
    before = {h["id"] for h in many_groups.ok(*STORE, "export", "--format", "json").json()}
    agreed = many_groups.ok(*STORE, "forget", "--filter", '{"kind": "topic"}', "--yes")
    assert "forgot 25 memories" in agreed.out
    many_groups.ok(*STORE, "add", "one memory kept", "--metadata", '{"kind": "kept"}')
    done = many_groups.ok(*STORE, "compact").out
    assert re.match(r"compacted the store \(1 memory\) in [\d.]+ s, [\d.]+ MB of index files", done)
    report = many_groups.ok(*STORE, "compact", "--json").json()
    assert report["done"] is True and report["skipped"] == ""
    kept = many_groups.ok(*STORE, "export", "--format", "json").json()
    assert [m["text"] for m in kept] == ["one memory kept"]
    assert not before & {m["id"] for m in kept}


def test_forget_by_id_and_by_filter_with_confirmation(many_groups: InProcess):
    ids = [h["id"] for h in many_groups.ok(*STORE, "search", "comets", "-k", "2", "--json").json()]
    result = many_groups(*STORE, "forget", ids[0], "no-such-id")
    assert result.code == 1 and "forgot 1 memory" in result.out
    assert "no memory with id 'no-such-id'" in result.error_line

    refused = many_groups(*STORE, "forget", "--filter", '{"kind": "topic"}')  # no answer: no
    assert refused.code == 1 and "nothing was forgotten" in refused.out
    declined = many_groups(*STORE, "forget", "--filter", '{"kind": "topic"}', input="n\n")
    assert declined.code == 1 and "forget 24 memories matching" in declined.err
    assert many_groups.ok(*STORE, "stats", "--json").json()["count"] == 24
    agreed = many_groups.ok(*STORE, "forget", "--filter", '{"kind": "topic"}', input="y\n")
    assert "forgot 24 memories" in agreed.out
    assert many_groups.ok(*STORE, "stats", "--json").json()["count"] == 0
    assert "no results: the store is empty" in many_groups.ok(*STORE, "search", "x").out


def test_forget_yes_skips_the_question(cli: InProcess):
    cli.ok(*STORE, "add", "one", "two", "--metadata", '{"t": 1}')
    assert "forgot 2 memories" in cli.ok(*STORE, "forget", "--filter", '{"t": 1}', "--yes").out


MISTAKES = [
    (("search", "x", "--filter", '{"a": '), 2, "--filter is not valid JSON"),
    (("add", "y", "--metadata", '{"a": [1, 2'), 2, "--metadata is not valid JSON"),
    (("search", "x", "--filter", "[" * 5000 + "]" * 5000), 2, "nested too deeply"),
    (("search", "x", "--filter", '{"a": {"$bad": 1}}'), 2, "unknown filter operator '$bad'"),
    (("--namespace", "bad name!", "add", "z"), 2, "invalid namespace 'bad name!'"),
    (("get", "nope"), 1, "no memory with id 'nope'"),
    (("groups", "--show", "g999"), 1, "no group with id 'g999'"),
    (("add", "--file", "missing.txt"), 2, "cannot read --file missing.txt"),
]


def test_user_mistakes_are_one_line_errors(cli: InProcess):
    cli.ok(*STORE, "add", "a memory")
    for argv, code, message in MISTAKES:
        result = cli(*STORE, *argv)
        assert result.code == code, (argv, result.err)
        assert message in result.error_line, (argv, result.err)


def test_mistakes_print_no_traceback_in_a_real_process(magnetic: Magnetic):
    magnetic.ok(*STORE, "add", "a memory")
    for argv, code, message in MISTAKES[2:3] + MISTAKES[5:6]:
        result = magnetic(*STORE, *argv)
        assert result.code == code and message in result.error_line, (argv, result.err)


@pytest.mark.parametrize(
    "argv, message",
    [
        (("stats",), "no memory store at"),
        (("groups",), "no memory store at"),
        (("search", "x"), "no memory store at"),
        (("export",), "no memory store at"),
        (("forget", "x"), "no memory store at"),
        (("compact",), "no memory store at"),
    ],
)
def test_a_mistyped_path_is_not_created(tmp_path: Path, capsys, argv, message):
    typo = tmp_path / "magnetic_memroy"
    assert main(["--path", str(typo), *argv], out=io.StringIO()) == 1
    assert message in capsys.readouterr().err
    assert not typo.exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (("add",), "nothing to add"),
        (("add", "   "), "nothing to add"),
        (("forget",), "forget needs ids or --filter"),
        (("search", "x", "--filter", '"just a string"'), "--filter must be a JSON object"),
        (("add", "x", "--metadata", '{"a":' * 40 + "1" + "}" * 40), "nested too deeply"),
        (("--server", "nohost", "stats"), "is not HOST:PORT"),
        (("--threshold", "7", "add", "x"), "--threshold 7.0"),
    ],
)
def test_usage_mistakes_exit_2_with_one_line(tmp_path: Path, capsys, argv, message):
    assert main(["--path", str(tmp_path / "s"), "--embedder", "hashing", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_k_must_be_positive(tmp_path: Path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--path", str(tmp_path), "search", "x", "-k", "0"])
    assert exit_info.value.code == 2
    assert "argument -k: must be at least 1" in capsys.readouterr().err


def test_a_missing_namespace_lists_the_existing_ones(tmp_path: Path, capsys):
    base = ["--path", str(tmp_path / "s"), "--embedder", "hashing"]
    assert main([*base, "--namespace", "work", "add", "x"], out=io.StringIO()) == 0
    assert main([*base, "--namespace", "wrok", "stats"], out=io.StringIO()) == 1
    assert "namespace 'wrok' does not exist" in (err := capsys.readouterr().err)
    assert "existing namespaces: work" in err


def test_help_is_plain_and_every_option_explained(magnetic: Magnetic, cli: InProcess):
    top = magnetic.ok("--help").out
    assert "``" not in top and ":class:" not in top
    for command in ("ingest", "search", "groups", "get", "export", "stats", "forget", "sleep"):
        assert re.search(rf"^\s+{command}\b", top, re.MULTILINE), command
    search = cli.ok("search", "--help").out
    assert "number of results (default: 5)" in search
    for option in ("--explain", "--json", "--namespace", "--filter", "--embedder", "--server"):
        line = next(x for x in search.splitlines() if x.strip().startswith(option))
        following = search.split(line, 1)[1].splitlines()[0].strip()
        assert line.strip() != option or following, option  # help on the line or the next
    sleep = cli.ok("sleep", "--help").out
    assert "--dry-run" in sleep and "print the plan, change nothing" in sleep
    assert "centroid similarity for merging" in sleep


def test_a_real_chroma_server_behind_server(
    own_chroma_server: ChromaServer, magnetic: Magnetic, cli: InProcess
):
    address = f"127.0.0.1:{own_chroma_server.port}"
    remote = ("--server", address, "--embedder", "hashing", "--namespace", "shared")
    magnetic.ok(*remote, "add", "the server keeps this memory")
    hits = cli.ok(*remote, "search", "server memory", "--json").json()
    assert hits[0]["text"] == "the server keeps this memory"
    assert not (magnetic.cwd / "magnetic_memory").exists()
    down = cli("--server", "127.0.0.1:9", "stats")
    assert down.code == 1 and "cannot reach a Chroma server at 127.0.0.1:9" in down.error_line


def test_sample_corpus_ships_in_the_package():
    rows = sample_memories()
    assert len(rows) >= 40
    assert {"id", "text", "metadata"} <= set(rows[0])


def test_the_console_script_runs_this_cli(magnetic: Magnetic):
    script = shutil.which("magnetic")
    assert script, "the magnetic console script is missing: pip install -e ."
    done = subprocess.run([script, "--help"], capture_output=True, text=True, env=magnetic.env)
    assert done.returncode == 0 and "ingest" in done.stdout and "forget" in done.stdout
