"""``magnetic chat`` end to end: a subprocess talking to a fake Ollama server."""

from __future__ import annotations

import re
import time
from pathlib import Path

from magnetic_core import HashingEmbedder, MagneticMemory
from tests.fake_ollama import FakeOllama, call, last_tool_result, say
from tests.langchain.agent.conftest import Magnetic, spawn


def _open(tmp_path: Path, namespace: str = "default") -> MagneticMemory:
    return MagneticMemory(
        path=str(tmp_path / "store"), namespace=namespace, embedder=HashingEmbedder()
    )


def _answer_from_memory(body: dict) -> dict:
    line = next(x for x in last_tool_result(body).splitlines() if x.startswith("- id="))
    return say("From memory: " + line.split(" | ")[3])


def _session(transcript: str) -> str:
    return re.search(r"session ([0-9a-f]{12})", transcript).group(1)


def test_a_fact_stored_in_one_session_answers_a_question_in_the_next(
    magnetic: Magnetic, tmp_path: Path
):
    script = [
        call("store_memory", text="The user's sister Ana lives in Porto."),
        say("Noted: your sister Ana lives in Porto."),
        call("search_memory", query="where does the sister live"),
        _answer_from_memory,
    ]
    with FakeOllama(script) as ollama:
        first = magnetic("chat", input="My sister Ana lives in Porto.\n", host=ollama.host)
        second = magnetic("chat", input="Where does my sister live?\n", host=ollama.host)

    assert first.returncode == 0, first.stderr
    assert '· stored "The user\'s sister Ana lives in Porto." -> id=' in first.stdout
    assert "ai> Noted: your sister Ana lives in Porto." in first.stdout
    assert second.returncode == 0, second.stderr
    assert "· searched 'where does the sister live' -> 1 memories in [" in second.stdout
    assert "ai> From memory: The user's sister Ana lives in Porto." in second.stdout

    # The model chose the tools from what it was offered, under the default persona.
    offered = [t["function"]["name"] for t in ollama.chat_requests[0]["tools"]]
    assert offered == ["search_memory", "store_memory", "forget_memory", "list_memory_group"]
    system = ollama.chat_requests[0]["messages"][0]
    assert system["role"] == "system" and "helpful assistant" in system["content"]
    # The second session starts without the first one's conversation: memory carried it.
    assert [m["role"] for m in ollama.chat_requests[2]["messages"]] == ["system", "user"]

    with _open(tmp_path) as memory:
        (cell,) = memory.get()
    assert cell.text == "The user's sister Ana lives in Porto."
    assert cell.metadata["source"] == "chat"
    assert cell.metadata["session"] == _session(first.stdout) != _session(second.stdout)
    assert abs(cell.metadata["timestamp"] - cell.created_at) < 60


def test_bad_tool_arguments_reach_the_model_which_retries(magnetic: Magnetic, tmp_path: Path):
    def retry(body: dict) -> dict:
        error = last_tool_result(body)
        assert "query: Field required" in error and "q: Extra inputs" in error
        return call("search_memory", query="favourite colour", k="2")

    script = [
        call("search_memory", q="favourite colour"),
        retry,
        lambda body: say("I found: " + last_tool_result(body).splitlines()[0]),
    ]
    with _open(tmp_path) as memory:
        memory.add(["The user's favourite colour is teal."], metadatas=[{"source": "note"}])
    with FakeOllama(script) as ollama:
        done = magnetic("chat", input="What is my favourite colour?\n", host=ollama.host)
    assert done.returncode == 0, done.stderr
    assert "· search_memory failed: Invalid arguments (query: Field required" in done.stdout
    assert "· searched 'favourite colour' -> 1 memories" in done.stdout
    assert "ai> I found: Found 1 memories (best first):" in done.stdout


def test_tool_rounds_are_bounded_and_quiet_hides_tool_lines(magnetic: Magnetic):
    looping = [call("list_memory_group")] * 2 + [say("Memory is empty, it seems.")]
    with FakeOllama(looping) as ollama:
        done = magnetic(
            "chat",
            "--max-tool-rounds",
            "2",
            "--quiet",
            input="What do you know?\n",
            host=ollama.host,
        )
    assert done.returncode == 0, done.stderr
    assert "ai> Memory is empty, it seems." in done.stdout
    assert "listed concept groups" not in done.stdout
    assert [bool(r.get("tools")) for r in ollama.chat_requests] == [True, True, False]
    assert "used every tool call allowed" in ollama.chat_requests[2]["messages"][-1]["content"]


def test_slash_commands_and_remember_all(magnetic: Magnetic, tmp_path: Path):
    with _open(tmp_path) as memory:
        (kept, dropped) = memory.add(["Lisbon flight leaves at 9:40.", "Old wifi password."])
    lines = [
        "/help",
        "/search Lisbon flight",
        "/groups",
        f"/forget {dropped} no-such-id",
        "/sleep",
        "/nonsense",
        "I like green tea.",
        "/exit",
        "this line is never read",
    ]
    with FakeOllama([say("Nice.")]) as ollama:
        done = magnetic("chat", "--remember-all", input="\n".join(lines) + "\n", host=ollama.host)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "/forget ID [ID ...]" in out and "/story [WORLD]" in out
    assert f"Lisbon flight leaves at 9:40.  (id {kept})" in out
    assert "concept groups over 2 memories" in out
    assert "forgot 1; no memory no-such-id" in out
    assert "· sleep:" in out
    assert "unknown command /nonsense" in out
    assert len(ollama.chat_requests) == 1
    with _open(tmp_path) as memory:
        texts = {c.text: c.metadata for c in memory.get()}
    assert set(texts) == {"Lisbon flight leaves at 9:40.", "I like green tea."}
    assert texts["I like green tea."]["role"] == "user"
    assert texts["I like green tea."]["source"] == "chat"


def test_ollama_down_is_one_line_naming_the_fixes(magnetic: Magnetic):
    done = magnetic("chat", input="hello\n", host="127.0.0.1:9")
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("magnetic: error: cannot reach Ollama at http://127.0.0.1:9")
    for fix in ("ollama serve", "ollama pull qwen2.5:3b", "--ollama-host"):
        assert fix in line


def test_models_without_tools_or_not_pulled_are_reported(magnetic: Magnetic):
    models = {"gemma:2b": ["completion"], "qwen2.5:3b": ["completion", "tools"]}
    with FakeOllama([], models=models) as ollama:
        no_tools = magnetic("chat", "--model", "gemma:2b", input="hi\n", host=ollama.host)
        missing = magnetic("chat", "--model", "llama3.2", input="hi\n", host=ollama.host)
    assert no_tools.returncode != 0 and "Traceback" not in no_tools.stderr
    assert "the model 'gemma:2b' does not support tool calling" in no_tools.stderr
    assert missing.returncode != 0 and "ollama pull llama3.2" in missing.stderr
    assert ollama.chat_requests == []


def test_a_server_without_capabilities_reports_the_missing_tools_mid_chat(magnetic: Magnetic):
    """Older Ollama servers have no capabilities in /api/show: the chat call itself says so."""
    with FakeOllama([], models={"phi:2b": ["completion"]}) as ollama:
        ollama.hide_capabilities = True
        done = magnetic("chat", "--model", "phi:2b", input="hi\n", host=ollama.host)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "does not support tool calling" in done.stderr.strip().splitlines()[-1]


def test_the_answer_streams_as_tokens_arrive(tmp_path: Path):
    answer = "Porto is a lovely city by the river"
    with FakeOllama([say(answer)]) as ollama:
        ollama.token_delay = 0.4
        proc = spawn(tmp_path, ollama.host, "chat")
        proc.stdin.write("Tell me about Porto.\n")
        proc.stdin.close()
        seen: dict[str, float] = {}
        out = ""
        while (char := proc.stdout.read(1)) != "":
            out += char
            for word in ("Porto", "river"):
                if out.endswith("ai> Porto" if word == "Porto" else word) and word not in seen:
                    seen[word] = time.monotonic()
        proc.wait(timeout=60)
    assert proc.returncode == 0, proc.stderr.read()
    assert f"ai> {answer}" in out
    # The first word was on screen well before the last one was sent.
    assert seen["river"] - seen["Porto"] > 1.5
