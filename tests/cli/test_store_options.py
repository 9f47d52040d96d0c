"""A store reopens the way it was built: its embedder, its threshold; the demo keeps to its
own store; commands that do not embed load no model and no LangChain."""

from __future__ import annotations

import pytest
from langchain_ollama import OllamaEmbeddings

from magnetic_langchain import MagneticVectorStore
from tests.cli.conftest import InProcess, Magnetic
from tests.fake_ollama import FakeOllama


def _imported(result_err: str) -> set[str]:
    """Top-level packages a `python -X importtime` run imported."""
    names = set()
    for line in result_err.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names


def test_the_demo_never_touches_the_users_memory(magnetic: Magnetic, cli: InProcess):
    cli.ok("--embedder", "hashing", "add", "my one precious memory")  # ./magnetic_memory
    result = magnetic.ok("--embedder", "hashing", "demo")
    assert "concept groups over 48 cells" in result.out
    assert len(result.out.split("\n? ")) == 7  # six explained answers
    assert "the temporary demo store was removed" in result.out
    assert list(magnetic.tmp.iterdir()) == []
    assert cli.ok("stats", "--json").json()["count"] == 1  # the user's store is as it was

    refused = cli("--embedder", "hashing", "--path", "magnetic_memory", "demo")
    assert refused.code == 2 and "was not made by the demo" in refused.error_line
    assert cli.ok("stats", "--json").json()["count"] == 1

    # A named demo directory is kept and can be run again.
    for _ in range(2):
        kept = cli.ok("--embedder", "hashing", "--path", "demo-store", "demo")
        assert "explore it: magnetic --path" in kept.out
    assert cli.ok("--path", "demo-store", "stats", "--json").json()["count"] == 48


def test_the_join_threshold_chosen_at_creation_is_kept(cli: InProcess):
    magnetic = cli
    base = ("--path", "mem", "--embedder", "hashing")
    magnetic.ok(*base, "--threshold", "0.97", "add", "red apples", "green apples")
    magnetic.ok(*base, "add", "red apples and green apples")  # reopened without --threshold
    stats = magnetic.ok(*base, "stats", "--json").json()
    assert (stats["join_threshold"], stats["threshold_source"]) == (0.97, "configured")
    assert stats["groups"] == 3  # nothing joined at 0.97
    other = magnetic(*base, "--threshold", "0.5", "add", "x")
    assert other.code == 2 and "this one's is 0.97" in other.error_line


def test_an_embedder_mismatch_names_the_embedder_to_pass(cli: InProcess):
    magnetic = cli
    magnetic.ok("--path", "mem", "--embedder", "hashing", "add", "hello there")
    wrong = magnetic("--path", "mem", "--embedder", "minilm", "search", "hello")
    assert wrong.code == 1
    assert "pass --embedder hashing or leave --embedder out" in wrong.error_line
    assert (
        magnetic.ok("--path", "mem", "search", "hello", "--json").json()[0]["text"] == "hello there"
    )


def test_a_langchain_ollama_store_opens_with_embedder_ollama(magnetic: Magnetic):
    with FakeOllama() as ollama:
        store = MagneticVectorStore(
            OllamaEmbeddings(model="nomic-embed-text", base_url=ollama.url),
            path=str(magnetic.cwd / "lc"),
        )
        store.add_texts(["tea is brewed from leaves", "espresso is pressed coffee"])
        store.close()
        sent = [x for r in ollama.embed_requests for x in r["input"]]
        assert "search_document: tea is brewed from leaves" in sent
        env = {"OLLAMA_HOST": ollama.url}
        for named in ((), ("--embedder", "ollama")):
            hits = magnetic.ok("--path", "lc", *named, "search", "leaves", "--json", env=env)
            assert hits.json()[0]["text"] == "tea is brewed from leaves"
        assert ollama.embed_requests[-1]["input"] == ["search_query: leaves"]
        wrong = magnetic("--path", "lc", "--embedder", "hashing", "stats", env=env)
        assert "pass --embedder ollama" in wrong.error_line


def test_commands_that_do_not_embed_or_chat_import_no_langchain(magnetic: Magnetic, cli: InProcess):
    cli.ok("--path", "mem", "--embedder", "hashing", "add", "a", "b")
    for argv in (("groups",), ("stats",), ("export",), ("search", "a"), ("sleep", "--dry-run")):
        run = magnetic.ok("--path", "mem", *argv, python=("-X", "importtime"))
        imported = _imported(run.err)
        assert not imported & {"langchain_core", "langchain", "langgraph", "llama_index"}, argv


@pytest.mark.minilm
def test_a_store_made_while_ollama_was_down_reopens_with_its_model(magnetic: Magnetic):
    # `auto` with no Ollama answering picks MiniLM and stamps it.
    magnetic.ok("--path", "mem", "add", "the cat sleeps on the sofa", "stock markets fell today")
    with FakeOllama() as ollama:  # now an Ollama answers: the store still opens with MiniLM
        env = {"OLLAMA_HOST": ollama.url}
        search = magnetic.ok("--path", "mem", "search", "a kitten napping", "--json", env=env)
        assert search.json()[0]["text"] == "the cat sleeps on the sofa"
        assert ollama.embed_requests == []
    assert "Loading weights" not in search.err
    for argv in (("groups",), ("stats", "--json")):
        run = magnetic("--path", "mem", *argv, python=("-X", "importtime"))
        imported = _imported(run.err)
        assert "sentence_transformers" not in imported and "torch" not in imported, argv
        if argv[0] == "stats":
            assert run.json()["embedder"] == "sentence-transformers/all-MiniLM-L6-v2"
