"""Entity extraction and the exact metadata codec."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from magnetic_core._store.codec import metadata_from_json, metadata_to_json, validate_metadata
from magnetic_core._text.entities import extract_entities
from magnetic_core._text.tokenize import terms
from magnetic_core.errors import MetadataError


@pytest.mark.parametrize(
    "text, entity",
    [
        ("the config lives in settings.yaml now", "settings.yaml"),
        ("logs go to /var/log/atlas/app.log daily", "/var/log/atlas/app.log"),
        ("mail ada@example.org about it", "ada@example.org"),
        ("see https://docs.example.com/guide?x=1 first", "https://docs.example.com/guide?x=1"),
        ("we met Grace Hopper in the lab", "grace hopper"),
        ("order INV-2024-0042 shipped", "inv-2024-0042"),
        ("call parse_config before run", "parse_config"),
    ],
)
def test_extracts_the_kinds_agents_ask_for(text, entity):
    assert entity in extract_entities(text)


def test_sentence_initial_words_are_not_entities():
    found = extract_entities("Yesterday it rained. Later the sun came out.")
    assert found == []


def test_entities_are_distinct_and_lowercase():
    found = extract_entities("Berlin is big. I love Berlin and BERLIN.")
    assert found.count("berlin") == 1


def test_terms_drop_stop_words():
    assert terms("The cat and the hat") == ["cat", "hat"]


def test_metadata_round_trips_exactly():
    meta = {
        "s": "x",
        "i": 3,
        "f": 0.1,
        "b": True,
        "none": None,
        "list": [1, "a", None],
        "tuple": (1, 2),
        "nested": {"a": {"b": [1.5, (2, 3)]}},
        "when": dt.datetime(2024, 5, 1, 12, 30),
        "day": dt.date(2024, 5, 1),
        "empty": "",
        "emptylist": [],
        "__mag_type__": "user key that looks like our tag",
    }
    stored = json.dumps(metadata_to_json(validate_metadata(meta, 0)))  # as the row holds it
    assert metadata_from_json(json.loads(stored)) == meta


@pytest.mark.parametrize(
    "meta, fragment",
    [
        ({"_mag_group": "x"}, "reserved prefix"),
        ({1: "x"}, "not a string"),
        ({"v": float("nan")}, "cannot be stored"),
        ({"v": {1, 2}}, "cannot be stored"),
        ({"v": object()}, "cannot be stored"),
        ("not a dict", "must be a dict"),
    ],
)
def test_unstorable_metadata_is_refused(meta, fragment):
    with pytest.raises(MetadataError, match=fragment):
        validate_metadata(meta, 0)


def test_paths_also_yield_their_file_name():
    assert extract_entities("see /opt/atlas/bin/deploy.sh")[:2] == [
        "/opt/atlas/bin/deploy.sh",
        "deploy.sh",
    ]
    assert "finances/taxes/2025.pdf" in extract_entities("scanned into finances/taxes/2025.pdf.")
    assert extract_entities("speed in km/h and/or miles") == []
