"""Entity extraction stays linear in the text: large log-like texts are processed whole."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from magnetic_core import MagneticMemory, MemoryConfig
from magnetic_core._text.entities import extract_entities
from magnetic_core.errors import InvalidInputError


def _log(lines: int, seed: int = 7) -> tuple[str, list[int]]:
    """A log with a distinct order number, mailbox and file name on every line."""
    rng = random.Random(seed)
    users = rng.sample(range(10**6), lines)
    text = "".join(
        f"2024-05-{i % 28 + 1:02d} 12:{i % 60:02d}:03 INFO [worker-{u % 97}] "
        f"GET /api/v1/users/{u}/orders order=INV-2024-{u:06d} from host{u % 500}.example.org "
        f"user=user{u}@example.com file=/var/log/app/service_{u}.log ReqId=Req{u}Ab "
        f"handler=OrderService{u % 50}Handler status=Failed Order Sync {u}\n"
        for i, u in enumerate(users)
    )
    return text, users


def test_a_two_megabyte_log_yields_every_lines_entities():
    # About 90K distinct entities: the quadratic extraction this replaces needed hours here
    # (666 KB took 141 s); a linear one finishes in seconds.
    text, users = _log(8000)
    assert len(text) > 2_000_000
    found = extract_entities(text)
    assert len(found) == len(set(found))
    got = set(found)
    for u in users:
        assert f"inv-2024-{u:06d}" in got
        assert f"user{u}@example.com" in got
        assert f"/var/log/app/service_{u}.log" in got
        assert f"service_{u}.log" in got
    # Parts of a path or an address are not entities of their own.
    assert not any(e.startswith("var/log") for e in got)
    assert "example.com" not in got


def test_entities_of_a_log_do_not_depend_on_where_it_is_cut():
    text, _ = _log(400)
    whole = extract_entities(text)
    lines = text.splitlines(keepends=True)
    per_line: dict[str, None] = {}
    for line in lines:
        per_line.update(dict.fromkeys(extract_entities(line)))
    assert set(whole) == set(per_line)


def test_a_text_over_the_limit_is_refused_naming_it(tmp_path, hashing):
    config = MemoryConfig(max_text_chars=1000)
    with MagneticMemory(path=str(tmp_path), embedder=hashing, config=config) as mem:
        mem.add(["x" * 1000], ids=["fits"])
        with pytest.raises(InvalidInputError, match="max_text_chars") as err:
            mem.add(["short", "y" * 1001], ids=["a", "b"])
        assert "1,001 characters" in str(err.value) and "1,000" in str(err.value)
        assert mem.count() == 1


def test_a_large_log_is_stored_whole_and_found_by_its_entities(tmp_path, hashing):
    assert MemoryConfig().max_text_chars >= 2_000_000
    text, users = _log(2500)  # 650 KB: minutes for the quadratic extraction
    with MagneticMemory(path=str(tmp_path), embedder=hashing) as mem:
        mem.add([text], ids=["log"])
        hit = mem.search(f"who placed INV-2024-{users[-1]:06d}?", k=1)[0]
        assert hit.id == "log" and f"inv-2024-{users[-1]:06d}" in hit.cell.entities


def test_the_one_search_for_signs_skips_no_pattern_that_would_match(monkeypatch):
    """A text in which one search finds no sign of the patterns skips them, and one with
    no sign but camel case's skips all but camel case: its entities are those of checking
    every pattern's sign, for texts with each kind of entity and for random texts of the
    characters the signs look for."""
    from magnetic_core._text import entities

    rng = random.Random(11)
    pieces = [
        "see https://example.org/a",
        "mail ada@example.com",
        "/opt/atlas/bin/deploy.sh",
        r"C:\Users\ada\notes.txt",
        "config.yaml",
        "INV-2024-0042",
        "PR#381",
        "ABC123",
        "snake_case_name",
        "camelCaseName",
        "HTTPServer",
        "iPhone 15",
        "naïveBayes",
        "Ada Lovelace",
        "Q4 results",
        "non-callable bond",
        "Café Müller",
        "plain words only",
        "x/y",
        "a:\\b",
        "v2",
        "WAL-MART 32 1.1 BIL",
        "report.PDF",
        "#12",
    ]
    alphabet = "aZ9 -_/#@:.\\éQx"
    texts = pieces + [" ".join(rng.sample(pieces, 3)) for _ in range(200)]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30))) for _ in range(500)]
    found = [entities.extract_entities(t) for t in texts]
    # every sign checked, camel case's too
    monkeypatch.setattr(entities, "_ANY_SIGN", re.compile(""))
    monkeypatch.setattr(entities, "_ANY_OR_CAMEL", re.compile(""))
    assert found == [entities.extract_entities(t) for t in texts]
    assert any(found)  # (the texts have entities to find)


@given(
    st.lists(
        st.sampled_from(
            ["the", "The", "A", "a", "It", "Ada", "NASA", "USA", "IBMs", "US", "I", "École",
             "école", "of", "van", "O'Brien", "AT&T", "1987", "March", ".", "!", ",", "\n"]
        ),
        max_size=8,
    ),
    st.booleans(),
)  # fmt: skip
def test_a_text_without_signs_keeps_the_capitalised_phrases_a_full_pass_finds(words, lead):
    """Texts with no sign of the other patterns go straight to the capitalised phrases,
    and those with no capital past their first character skip even that: the same
    entities as the full pass over the phrases."""
    from magnetic_core._text import entities

    text = (" " if lead else "") + " ".join(words)
    assert entities._ANY_OR_CAMEL.search(text) is None
    found: dict[str, None] = {}
    entities._capitalised(text, None, found)
    assert extract_entities(text) == list(found)


def test_a_sentence_capitalised_only_by_position_names_nothing_and_an_acronym_does():
    assert extract_entities("Minimum subscription would be for 400 shares with") == []
    assert extract_entities("IBMs said it would") == ["ibms"]
    assert extract_entities("The talks with Ada went well") == ["ada"]
