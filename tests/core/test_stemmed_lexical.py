"""BM25 on word stems, through MagneticMemory.search on a real Chroma store."""

from __future__ import annotations

from magnetic_core import MagneticMemory

TEXTS = [
    "Melanie: I painted that lake sunrise last year.",
    "Caroline: The sunset over the bay was lovely.",
    "Melanie: We went camping with the kids in June.",
    "Caroline: My studies in counseling start in the fall.",
    "Caroline: Studies show that pets help with stress.",
    "Melanie: I bought new brushes for the art class.",
]


def test_a_question_in_another_inflection_finds_the_turn_by_its_stem(tmp_path, hashing):
    with MagneticMemory(path=str(tmp_path / "s"), embedder=hashing) as mem:
        mem.add(TEXTS, ids=[f"t{i}" for i in range(len(TEXTS))])
        # No word of the question is in the turn as written: "painting" meets "painted".
        hits = mem.search("who was painting?", k=6, explain=True)
        assert hits[0].id == "t0"
        assert hits[0].route is not None and hits[0].route.lexical > 0
        assert all(h.route is not None and h.route.lexical == 0 for h in hits[1:])
        # "study" finds both "studies" turns; the labels keep the words as written.
        studies = [h.id for h in mem.search("what did she study", k=2, explain=True)]
        assert set(studies) == {"t3", "t4"}
        labels = " ".join(g.label for g in mem.groups())
        assert "studi " not in labels + " " and "paint " not in labels + " "
