"""Conversational recall through MagneticMemory.search on a real Chroma store: turns stored
with the ``session_id`` / ``turn`` convention lift their neighbours, and only text queries
change."""

from __future__ import annotations

import numpy as np
import pytest

from magnetic_core import MagneticMemory, MemoryConfig
from magnetic_core.errors import InvalidInputError

# One exchange whose answer (turn 3) shares no content word with the question; the
# question matches the turns around it.
EXCHANGE = [
    "Ana: How was your week, Ben?",
    "Ben: Busy, I finally looked into adoption agencies.",
    "Ana: Oh wow, which adoption agencies did you like?",
    "Ben: Hopeful Hearts and Little Steps, both close to home.",
    "Ana: That is wonderful news.",
]
QUESTION = "Which adoption agencies did Ben like?"
ANSWER = "s-adopt:3"

# Other sessions with turns that share the question's words one at a time.
FILLER = [
    "Ben: I like hiking on weekends with my dog.",
    "Ana: Did you like the new cafe near the station?",
    "Ben: Steps of the old library are being repaired.",
    "Ana: The home team won again last night.",
    "Ben: I read about agencies that place interns abroad.",
    "Ana: Ben, which movie did you like most this year?",
    "Ben: Close the window please, it is cold.",
    "Ana: Hearts card game night is on Friday.",
    "Ben: My sister likes painting landscapes.",
    "Ana: Did Ben call you about the car?",
    "Ben: Adoption of the new tax rules was delayed.",
    "Ana: Which bus goes to the museum?",
]


def _store(mem: MagneticMemory, *, turns: bool = True, order: list[int] | None = None) -> None:
    rows = []
    for s in range(3):
        for t in range(4):
            text = FILLER[s * 4 + t]
            meta = {"session_id": f"s-filler-{s}", "speaker": text.split(":")[0]}
            if turns:
                meta["turn"] = t
            rows.append((f"s-filler-{s}:{t}", text, meta))
    for t, text in enumerate(EXCHANGE):
        meta = {"session_id": "s-adopt", "speaker": text.split(":")[0]}
        if turns:
            meta["turn"] = t
        rows.append((f"s-adopt:{t}", text, meta))
    if order is not None:
        rows = [rows[i] for i in order]
    ids, texts, metas = zip(*rows, strict=True)
    mem.add(list(texts), metadatas=list(metas), ids=list(ids))


@pytest.fixture
def mem(tmp_path, hashing):
    with MagneticMemory(path=str(tmp_path / "store"), embedder=hashing) as memory:
        yield memory


def _ids(hits):
    return [h.id for h in hits]


OFF = {"context_weight": 0.0, "session_weight": 0.0}


def test_the_answer_turn_after_a_matching_turn_is_lifted_into_the_results(mem):
    _store(mem)
    assert ANSWER not in _ids(mem.search(QUESTION, k=8, **OFF))
    hits = mem.search(QUESTION, k=4, explain=True, session_weight=0.0)
    assert ANSWER in _ids(hits)
    lifted = next(h for h in hits if h.id == ANSWER)
    assert lifted.route is not None and lifted.route.context > 0
    assert lifted.rank_score == pytest.approx(
        lifted.score + lifted.route.boost + lifted.route.lexical + lifted.route.context, abs=1e-5
    )


def test_the_session_of_the_best_match_comes_back_before_other_sessions(mem):
    _store(mem)
    session = {f"s-adopt:{t}" for t in range(len(EXCHANGE))}
    assert set(_ids(mem.search(QUESTION, k=5, **OFF))) != session
    hits = mem.search(QUESTION, k=5, context_weight=0.0, explain=True)
    assert set(_ids(hits)) == session
    assert all(h.route is not None and h.route.context > 0 for h in hits)
    assert set(_ids(mem.search(QUESTION, k=5))) == session  # the defaults do both


def test_add_order_makes_the_thread_when_no_turn_is_given(mem):
    _store(mem, turns=False)
    assert ANSWER not in _ids(mem.search(QUESTION, k=8, **OFF))
    assert ANSWER in _ids(mem.search(QUESTION, k=4))


def test_turn_numbers_order_the_thread_whatever_the_order_of_adds(tmp_path, hashing):
    n = len(FILLER) + len(EXCHANGE)
    shuffled = np.random.default_rng(5).permutation(n).tolist()
    with MagneticMemory(path=str(tmp_path / "s"), embedder=hashing) as mem:
        for i in shuffled:  # one add per turn, in a random order
            _store_one(mem, i)
        assert ANSWER in _ids(mem.search(QUESTION, k=4))
    # Reopened from Chroma: the threads are rebuilt from the stored metadata.
    with MagneticMemory(path=str(tmp_path / "s"), embedder=hashing) as mem:
        assert ANSWER in _ids(mem.search(QUESTION, k=4))
        assert ANSWER not in _ids(mem.search(QUESTION, k=8, **OFF))


def _store_one(mem: MagneticMemory, i: int) -> None:
    if i < len(FILLER):
        s, t = divmod(i, 4)
        cid, text, session = f"s-filler-{s}:{t}", FILLER[i], f"s-filler-{s}"
    else:
        t = i - len(FILLER)
        cid, text, session = f"s-adopt:{t}", EXCHANGE[t], "s-adopt"
    mem.add([text], metadatas=[{"session_id": session, "turn": t}], ids=[cid])


def test_a_turn_of_another_session_is_not_a_neighbour(mem):
    # The answer stored under another session right after the exchange: nothing lifts it.
    _store(mem)
    mem.add([EXCHANGE[3]], metadatas=[{"session_id": "elsewhere", "turn": 0}], ids=["elsewhere:0"])
    mem.delete(ids=[ANSWER])
    hits = mem.search(QUESTION, k=4, explain=True)
    assert "elsewhere:0" not in _ids(hits)


def test_deleted_and_updated_turns_leave_the_thread(mem):
    _store(mem)
    mem.delete(ids=["s-adopt:2"])  # the question turn in between goes
    mem.add(["Ana: lunch?"], metadatas=[{"session_id": "s-adopt", "turn": 1}], ids=["s-adopt:1"])
    # Nothing in the answer's session matches the question any more.
    assert ANSWER not in _ids(mem.search(QUESTION, k=4))


def test_vector_queries_and_stores_without_threads_rank_as_before(tmp_path, hashing):
    with MagneticMemory(path=str(tmp_path / "s"), embedder=hashing) as mem:
        _store(mem)
        q = hashing.embed_query(QUESTION)
        by_vector = mem.search(vector=q, k=8)
        assert [(h.id, h.rank_score) for h in by_vector] == [
            (h.id, h.rank_score) for h in mem.search(vector=q, k=8, **OFF)
        ]
    with MagneticMemory(path=str(tmp_path / "flat"), embedder=hashing) as mem:
        mem.add(FILLER + EXCHANGE)  # no session metadata: no threads
        assert [(h.id, h.rank_score) for h in mem.search(QUESTION, k=8)] == [
            (h.id, h.rank_score) for h in mem.search(QUESTION, k=8, **OFF)
        ]


def test_a_filter_keeps_lifted_turns_it_matches_and_context_it_does_not(mem):
    # Ben's answer is lifted by Ana's question next to it, though Ana's turns are filtered out.
    _store(mem)
    hits = mem.search(QUESTION, k=2, filter={"speaker": "Ben"})
    assert [h.metadata["speaker"] for h in hits] == ["Ben", "Ben"]
    assert ANSWER in _ids(hits)
    assert ANSWER not in _ids(mem.search(QUESTION, k=2, filter={"speaker": "Ben"}, **OFF))


def test_a_bad_context_weight_is_refused(mem):
    _store(mem)
    with pytest.raises(InvalidInputError, match="context_weight"):
        mem.search(QUESTION, context_weight=-1.0)
    with pytest.raises(InvalidInputError, match="session_weight"):
        mem.search(QUESTION, session_weight="high")
    with pytest.raises(InvalidInputError, match="context_weight"):
        MemoryConfig(context_weight=float("nan"))


def test_a_new_thread_after_a_deleted_one_is_not_merged_with_another(mem):
    _store(mem)
    mem.delete(ids=[f"s-filler-0:{t}" for t in range(4)])  # a whole thread goes
    mem.add(["Ben: The printer is out of paper."], metadatas=[{"session_id": "new"}], ids=["n:0"])
    hits = {h.id: h for h in mem.search(QUESTION, k=30, context_weight=0.0, explain=True)}
    best = hits["s-adopt:2"].rank_score - hits["s-adopt:2"].route.context
    # The new session gains only from its own best turn, not from the exchange's.
    assert hits["n:0"].route.context < 0.5 * best
    assert hits["s-adopt:3"].route.context == pytest.approx(
        mem.config.session_weight * best, rel=1e-4
    )
