"""Conversational recall on LoCoMo (development half): turn recall@10 and @5 per category.

Usage: ``python -m benchmarks.locomo [--smoke] [--out DIR]``

Each of the five conversations becomes its own store (one namespace per conversation, as
one user's chat history would be), and every turn is one memory, stored the way a user
storing a chat would: text ``"<speaker>: <text>"`` (image turns add ``[shares image:
<caption>]``), metadata ``session_id`` (the session), ``timestamp`` (the session's date,
ISO 8601), ``turn`` (position in the session) and ``speaker``; turns are added in order.
Questions of categories 1-4 whose evidence exists are asked, and a question scores
``|gold turns in the top k| / |gold turns|``.

The baselines are re-measured beside MagneticMemory in the same run, on the same MiniLM
vectors: exact dense search, BM25, reciprocal-rank fusion of the two, and dense plus
0.3 x BM25 normalised by the query's best. Turn and question vectors are embedded once and
cached in ``~/.cache/magnetic-bench`` (``locomo_dev_*.npy``). Conversations ``conv-26``
and ``conv-30`` are the training split the engine's defaults were fitted on; the others are
held out, and the results show both.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import common
from magnetic_core import MemoryConfig
from magnetic_core._text.tokenize import terms

LOCOMO = common.DATA / "locomo-dev" / "locomo_dev.json"
EMBEDDER_NAME = "sentence-transformers/all-MiniLM-L6-v2"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
TRAIN = ("conv-26", "conv-30")
KS = (10, 5)
DEPTH = 10
RRF_K = 60


@dataclass(frozen=True)
class Question:
    """One question with its gold evidence turns."""

    text: str
    evidence: tuple[str, ...]
    category: int


@dataclass(frozen=True)
class Conversation:
    """One conversation: its turns (ids, texts, metadata, in order) and its questions."""

    sample_id: str
    ids: list[str]
    texts: list[str]
    metadatas: list[dict[str, Any]]
    questions: list[Question]


def session_timestamp(raw: str) -> str:
    """ISO 8601 of a LoCoMo session date such as ``"1:56 pm on 8 May, 2023"``."""
    return datetime.strptime(raw.strip(), "%I:%M %p on %d %B, %Y").isoformat()


def evidence_ids(raw: Sequence[str]) -> tuple[str, ...]:
    """Normalised dia_ids of an evidence list (some strings hold two ids, or ``D:11:26``)."""
    out: list[str] = []
    for item in raw:
        for part in re.split(r"[;\s]+", item):
            part = part.strip()
            if part:
                out.append(re.sub(r"^D:", "D", part))
    return tuple(dict.fromkeys(out))


def load(path: Path = LOCOMO) -> list[Conversation]:
    """The conversations of the dev file, turns in session and turn order."""
    if not path.is_file():
        raise SystemExit(f"{path} not found: set MAGNETIC_BENCH_DATA to the shared data folder")
    convs = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        conv = sample["conversation"]
        sid = sample["sample_id"]
        ids, texts, metas = [], [], []
        sessions = sorted(
            int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k) and conv[k]
        )
        for n in sessions:
            stamp = session_timestamp(conv[f"session_{n}_date_time"])
            for pos, turn in enumerate(conv[f"session_{n}"]):
                text = f"{turn['speaker']}: {turn['text']}"
                if turn.get("blip_caption"):
                    text += f" [shares image: {turn['blip_caption']}]"
                ids.append(turn["dia_id"])
                texts.append(text)
                metas.append(
                    {
                        "session_id": f"{sid}/session_{n}",
                        "timestamp": stamp,
                        "turn": pos,
                        "speaker": turn["speaker"],
                    }
                )
        known = set(ids)
        questions = []
        for qa in sample["qa"]:
            gold = tuple(e for e in evidence_ids(qa.get("evidence", [])) if e in known)
            if qa["category"] in CATEGORIES and gold:
                questions.append(Question(qa["question"], gold, int(qa["category"])))
        convs.append(Conversation(sid, ids, texts, metas, questions))
    return convs


def _cached(name: str, texts: list[str], embed: Callable[[list[str]], np.ndarray]) -> np.ndarray:
    """Vectors of ``texts`` from ``<name>-<digest>.npy``, embedded (and saved) when missing.

    The file name carries a digest of the texts, so a subset never overwrites the full set.
    """
    digest = hashlib.sha256("\x00".join(texts).encode()).hexdigest()
    path = common.cache_dir() / f"{name}-{digest[:12]}.npy"
    if path.exists():
        return np.load(path)
    t0 = time.perf_counter()
    vecs = np.asarray(embed(texts), np.float32)
    tmp = path.with_suffix(".tmp.npy")
    np.save(tmp, vecs)
    tmp.replace(path)
    print(f"embedded {len(texts)} texts into {path} in {time.perf_counter() - t0:.0f}s")
    return vecs


def vectors(convs: list[Conversation], smoke: bool) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """MiniLM (hashing in smoke mode) vectors of every turn and question, per conversation."""
    turns = [t for c in convs for t in c.texts]
    questions = [q.text for c in convs for q in c.questions]
    if smoke:
        tv, qv = common.load_vectors("", turns), common.load_vectors("", questions)
    else:
        model = common.embedder(False)
        tv = _cached("locomo_dev_turns", turns, model.embed_documents)
        qv = _cached("locomo_dev_questions", questions, model.embed_documents)
    t_at = np.cumsum([0] + [len(c.texts) for c in convs])
    q_at = np.cumsum([0] + [len(c.questions) for c in convs])
    return (
        [np.asarray(tv[a:b], np.float32) for a, b in itertools.pairwise(t_at)],
        [np.asarray(qv[a:b], np.float32) for a, b in itertools.pairwise(q_at)],
    )


def recall(found: Sequence[str], gold: Sequence[str], k: int) -> float:
    """Share of the gold turns in the first ``k`` found."""
    top = set(found[:k])
    return sum(1 for g in gold if g in top) / len(gold)


Ranker = Callable[[int], list[str]]


class PlainBM25:
    """Okapi BM25 (k1 1.2, b 0.75) over the engine's content words, unstemmed: the baseline.

    Kept apart from the engine's lexical index so the baselines stay what the issue
    measured while the engine changes.
    """

    def __init__(self, texts: Sequence[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.docs = [Counter(terms(t)) for t in texts]
        self.lengths = np.array([sum(d.values()) for d in self.docs], np.float64)
        self.df = Counter(w for d in self.docs for w in d)

    def scores(self, query: str) -> np.ndarray:
        """BM25 of every document for the query's distinct content words."""
        n, avgdl = len(self.docs), float(self.lengths.mean())
        out = np.zeros(n)
        norm = self.k1 * (1.0 - self.b + self.b * self.lengths / avgdl)
        for w in dict.fromkeys(terms(query)):
            df = self.df.get(w, 0)
            if df == 0:
                continue
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            tf = np.array([d.get(w, 0) for d in self.docs], np.float64)
            out += idf * tf * (self.k1 + 1.0) / (tf + norm)
        return out


class Baselines:
    """The issue's reference rankings of one conversation, from its vectors and BM25."""

    def __init__(self, conv: Conversation, tvecs: np.ndarray, qvecs: np.ndarray) -> None:
        self.conv, self.tvecs, self.qvecs = conv, tvecs, qvecs
        self.bm25 = PlainBM25(conv.texts)

    def _dense(self, i: int) -> np.ndarray:
        return self.tvecs @ self.qvecs[i]

    def _lexical(self, i: int) -> np.ndarray:
        return self.bm25.scores(self.conv.questions[i].text)

    def _top(self, scores: np.ndarray) -> list[str]:
        order = np.argsort(-scores, kind="stable")[:DEPTH]
        return [self.conv.ids[j] for j in order]

    def dense(self, i: int) -> list[str]:
        return self._top(self._dense(i))

    def lexical(self, i: int) -> list[str]:
        return self._top(self._lexical(i))

    def rrf(self, i: int) -> list[str]:
        fused = np.zeros(len(self.conv.ids))
        for scores in (self._dense(i), self._lexical(i)):
            ranks = np.empty(len(scores), np.int64)
            ranks[np.argsort(-scores, kind="stable")] = np.arange(len(scores))
            fused += 1.0 / (RRF_K + 1 + ranks)
        return self._top(fused)

    def weighted(self, i: int) -> list[str]:
        lex = self._lexical(i)
        best = float(lex.max())
        return self._top(self._dense(i) + (0.3 * lex / best if best > 0 else 0.0))


def _score(rows: list[tuple[str, int, list[str], Sequence[str]]]) -> dict[str, Any]:
    """Recall@k per category, overall and per split from ``(conv, category, found, gold)``."""
    out: dict[str, Any] = {}
    for k in KS:
        per: dict[str, list[float]] = {"all": [], "train": [], "held_out": []}
        for conv, cat, found, gold in rows:
            r = recall(found, gold, k)
            per["all"].append(r)
            per["train" if conv in TRAIN else "held_out"].append(r)
            per.setdefault(CATEGORIES[cat], []).append(r)
        out[f"recall_at_{k}"] = {name: round(float(np.mean(v)), 4) for name, v in per.items() if v}
    return out


def _searcher(memory: Any, conv: Conversation, qvecs: np.ndarray, kwargs: dict[str, Any]) -> Ranker:
    """MagneticMemory's ranking of question ``i`` (its text and cached vector)."""

    def rank(i: int) -> list[str]:
        text = conv.questions[i].text
        return [h.id for h in memory.search(text, vector=qvecs[i], k=DEPTH, **kwargs)]

    return rank


def stored(conv: Conversation, tvecs: np.ndarray) -> Any:
    """A fresh in-memory store holding the conversation's turns, added one session at a
    time in conversation order, as a chat app stores them."""
    memory = common.in_memory(common.VectorsOnly(EMBEDDER_NAME, tvecs.shape[1]), MemoryConfig())
    for sess in dict.fromkeys(m["session_id"] for m in conv.metadatas):
        at = [j for j, m in enumerate(conv.metadatas) if m["session_id"] == sess]
        memory.add(
            [conv.texts[j] for j in at],
            metadatas=[conv.metadatas[j] for j in at],
            ids=[conv.ids[j] for j in at],
            vectors=tvecs[at],
        )
    return memory


SYSTEMS = ("exact dense", "BM25", "reciprocal-rank fusion", "dense + 0.3 x BM25/max")


def run(smoke: bool, variants: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Every baseline and MagneticMemory variant over every conversation."""
    convs = load()
    if smoke:
        convs = [
            Conversation(
                c.sample_id,
                c.ids[:120],
                c.texts[:120],
                c.metadatas[:120],
                [q for q in c.questions if all(e in set(c.ids[:120]) for e in q.evidence)],
            )
            for c in convs[:2]
        ]
    tvecs, qvecs = vectors(convs, smoke)
    rows: dict[str, list[tuple[str, int, list[str], Sequence[str]]]] = {}
    latency: dict[str, list[float]] = {}
    for conv, tv, qv in zip(convs, tvecs, qvecs, strict=True):
        base = Baselines(conv, tv, qv)
        rankers: dict[str, Ranker] = dict(
            zip(SYSTEMS, (base.dense, base.lexical, base.rrf, base.weighted), strict=True)
        )
        memory = stored(conv, tv)
        for name, kwargs in variants.items():
            rankers[name] = _searcher(memory, conv, qv, kwargs)
        for i in range(len(conv.questions)):
            # Untimed warm-up: the first searches of a store label its groups (cached).
            memory.search(conv.questions[i].text, vector=qv[i], k=DEPTH)
        for name, rank in rankers.items():
            for i, q in enumerate(conv.questions):
                t0 = time.perf_counter()
                found = rank(i)
                latency.setdefault(name, []).append(time.perf_counter() - t0)
                rows.setdefault(name, []).append((conv.sample_id, q.category, found, q.evidence))
        memory.close()
    results = []
    for name, scored in rows.items():
        entry = {"system": name, **_score(scored)}
        if name in variants:
            entry.update(common.percentiles_ms(latency[name]))
            entry["search_options"] = variants[name]
        results.append(entry)
    return {
        "conversations": [c.sample_id for c in convs],
        "train_split": list(TRAIN),
        "questions": sum(len(c.questions) for c in convs),
        "turns": sum(len(c.texts) for c in convs),
        "rows": results,
    }


VARIANTS: dict[str, dict[str, Any]] = {
    "MagneticMemory default": {},
    "MagneticMemory without neighbouring turns": {"context_weight": 0.0},
    "MagneticMemory without the session's best": {"session_weight": 0.0},
    "MagneticMemory without threads (dense + entity + BM25)": {
        "context_weight": 0.0,
        "session_weight": 0.0,
    },
    "MagneticMemory without entity stage": {"entity_boost": 0.0},
}


def table(res: dict[str, Any]) -> str:
    """The markdown result tables: recall@10 and @5 per category and split."""
    cols = ["all", "held_out", "train", *CATEGORIES.values()]
    md = ""
    for k in KS:
        md += f"\nTurn recall@{k}:\n\n"
        md += common.markdown_table(
            ["search", *cols, "p50 ms"],
            [
                [r["system"], *(r[f"recall_at_{k}"].get(c) for c in cols), r.get("p50_ms", "")]
                for r in res["rows"]
            ],
        )
    return md


def main(argv: list[str] | None = None) -> None:
    """Run and write ``locomo.json`` / ``locomo.md``."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--smoke", action="store_true", help="two short conversations, hashing vectors")
    ap.add_argument("--out", type=Path, default=common.RESULTS)
    args = ap.parse_args(argv)
    res = run(args.smoke, VARIANTS)
    for r in res["rows"]:
        r10, r5 = r["recall_at_10"], r["recall_at_5"]
        print(
            f"{r['system']:>52}: R@10 {r10['all']:.4f}  R@5 {r5['all']:.4f}  "
            f"held-out R@10 {r10.get('held_out', float('nan')):.4f}"
        )
    md = (
        f"{res['turns']} turns, {res['questions']} questions (categories 1-4) in "
        f"{len(res['conversations'])} conversations; training split {', '.join(TRAIN)}, the "
        "others held out. p50 is the search latency per question (vectors given).\n" + table(res)
    )
    name = "locomo_smoke" if args.smoke else "locomo"
    common.write_results(args.out, name, res, md, "LoCoMo dev half: conversational turn recall")


if __name__ == "__main__":
    main()
