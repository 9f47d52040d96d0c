"""Needles in a haystack: specific facts planted among 10K Reuters passages, asked for naturally.

Usage: ``python -m benchmarks.needles [--haystack 10000]``

Each needle holds something a user asks for by name (a file name, a path, an e-mail address,
an order number, a person); each query asks for it in plain language. A needle counts as
found when it is in the top 3. The haystack is the first passages of the Reuters file (their
cached MiniLM vectors); needles and queries are embedded with MiniLM when the run starts.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import common
from magnetic_core import MemoryConfig

TOP = 3

# (needle text, natural-language query). Written for this benchmark.
NEEDLES: list[tuple[str, str]] = [
    (
        "The staging database credentials are stored in deploy/secrets/staging.env and rotate "
        "every 30 days.",
        "Where are the staging database credentials kept?",
    ),
    (
        "Marta Kowalczyk from the Lisbon office approved the Q3 travel budget of 18,400 euros.",
        "Who approved the Q3 travel budget?",
    ),
    (
        "Order INV-2024-0042 for 300 ergonomic chairs ships from the Rotterdam warehouse on "
        "14 March.",
        "When does order INV-2024-0042 ship?",
    ),
    (
        "Send the signed NDA to legal.review@halvorsen-tech.no before the kickoff meeting.",
        "Which address should the signed NDA be sent to?",
    ),
    (
        "The nightly backup script lives at /opt/backup/bin/nightly_snapshot.sh and writes to the "
        "bucket cold-archive-eu.",
        "Where is the nightly backup script?",
    ),
    (
        "Dr. Aiyana Whitehorse leads the soil microbiome study at the Saskatoon field station.",
        "Who is in charge of the soil microbiome study?",
    ),
    (
        "PR#381 fixed the race condition in the websocket reconnect handler.",
        "Which pull request fixed the websocket reconnect race condition?",
    ),
    (
        "The fine-tuning config is experiments/llm/finetune_v7.yaml, with a learning rate of 3e-5.",
        "What learning rate does finetune_v7.yaml use?",
    ),
    (
        "Kenji Nakamura's flight to Osaka is booked under confirmation code QX7-PLM-22.",
        "What is Kenji Nakamura's flight confirmation code?",
    ),
    (
        "Invoice 88-3021-B from Fjordline Catering was paid twice by mistake in February.",
        "Which catering invoice did we pay twice?",
    ),
    (
        "The notebook churn_q2_cohorts.ipynb shows 4.1 percent monthly churn for the Q2 cohorts.",
        "What monthly churn did the Q2 cohort notebook show?",
    ),
    (
        "Forward vendor questions to priya.raman@northwind-labs.com, not to the general inbox.",
        "Who should vendor questions be forwarded to?",
    ),
    (
        "Tracking number 1Z999AA10123456784 belongs to the replacement laptop for Ines Duarte.",
        "What is the tracking number of Ines Duarte's replacement laptop?",
    ),
    (
        "The production ingress rules are defined in infra/k8s/ingress-prod.yaml; Tomasz changed "
        "them last.",
        "Where are the production Kubernetes ingress rules defined?",
    ),
    (
        "Olufemi Adeyemi will present the battery recycling pilot results at the all-hands.",
        "Who presents the battery recycling pilot results?",
    ),
    (
        "Ticket SUP-55817: the mobile app crashes when the camera permission is denied.",
        "What does support ticket SUP-55817 say?",
    ),
    (
        "The wedding venue deposit of 2,500 dollars is due to Lakeside Pavilion by June 1.",
        "When is the deposit for the wedding venue due?",
    ),
    (
        "The API rate limiter lives in src/gateway/ratelimit.go and caps clients at 120 requests "
        "per minute.",
        "What is our API rate limit and where is it configured?",
    ),
    (
        "Greta Lindqvist is allergic to penicillin and tree nuts; keep an EpiPen in the first aid "
        "kit.",
        "What is Greta Lindqvist allergic to?",
    ),
    (
        "Purchase order PO-77314 covers 12 replacement solar panels for the Nairobi clinic roof.",
        "What does purchase order PO-77314 cover?",
    ),
    (
        "The guest Wi-Fi password for the Berlin office is in office/berlin/wifi_guest.txt.",
        "Where can I find the Berlin guest Wi-Fi password?",
    ),
    (
        "Rafael Okonkwo-Smith owns the migration of the billing service from MySQL to Postgres.",
        "Who owns the billing database migration?",
    ),
    (
        "j.whitfield@brightmail.co.uk complained about a damaged espresso machine, order 7731-QX.",
        "Which customer complained about the damaged espresso machine?",
    ),
    (
        "The coral reef mapping grant application is due on 30 September; the draft is "
        "grants/reef_mapping_2025.docx.",
        "When is the coral reef mapping grant application due?",
    ),
    # In-domain needles: newswire-like facts that compete with thousands of similar passages.
    (
        "Hartwell Mining Corp said its Nevada unit shipped 4,210 ounces of gold in the quarter, "
        "according to filing HMC-8K-44921.",
        "How much gold did Hartwell Mining's Nevada unit ship?",
    ),
    (
        "Trader Lucia Ferrante at Banca Lombarda Sud said the bank cut its prime rate to 9.25 pct.",
        "Which trader commented on Banca Lombarda Sud cutting its prime rate?",
    ),
    (
        "The Kirov Grain Board sold 150,000 tonnes of wheat to Egypt under tender KGB-1987-07.",
        "How much wheat did the Kirov Grain Board sell to Egypt?",
    ),
    (
        "Analyst Tobias Renner of Renner Equity Research raised Q.E.D. Petroleum to a buy rating.",
        "Who upgraded Q.E.D. Petroleum to buy?",
    ),
    (
        "Coastal Freight Lines will acquire Pelican Barge Co for 42 mln dlrs, contract "
        "CFL-PB-0412 shows.",
        "Who is acquiring Pelican Barge Co and for how much?",
    ),
    (
        "Dairy cooperative Nordmjolk said butter stocks reached 61,300 tonnes, a record, in "
        "report ND-STK-19.",
        "What record butter stock level did Nordmjolk report?",
    ),
]


def plant(haystack: int, seed: int = 3) -> tuple[list[str], list[str], np.ndarray]:
    """Haystack texts with the needles inserted at seeded positions; returns ids too."""
    texts = common.reuters_texts(haystack)
    ids = [f"reuters-{i}" for i in range(len(texts))]
    positions = np.sort(
        np.random.default_rng(seed).choice(len(texts) + len(NEEDLES), len(NEEDLES), replace=False)
    )
    for j, pos in enumerate(positions.tolist()):
        texts.insert(pos, NEEDLES[j][0])
        ids.insert(pos, f"needle-{j:02d}")
    return texts, ids, positions


def run(haystack: int, smoke: bool) -> dict[str, Any]:
    """Plant, ingest, query; returns per-needle ranks for each system."""
    texts, ids, _ = plant(haystack)
    emb = common.embedder(smoke)
    needle_rows = [i for i, c in enumerate(ids) if c.startswith("needle-")]
    hay_rows = [i for i, c in enumerate(ids) if not c.startswith("needle-")]
    vecs = np.empty((len(texts), emb.dim), np.float32)
    if smoke:
        hay = common.load_vectors("", [texts[i] for i in hay_rows])
    else:
        hay = common.reuters_prefix(len(hay_rows))
    vecs[hay_rows] = np.asarray(hay[: len(hay_rows)], np.float32)
    vecs[needle_rows] = np.asarray(emb.embed_documents([n for n, _ in NEEDLES]), np.float32)
    qvecs = np.asarray(emb.embed_documents([q for _, q in NEEDLES]), np.float32)
    memory = common.in_memory(common.VectorsOnly(emb.name, emb.dim), MemoryConfig())
    common.add_in_batches(memory, texts, vecs, 1000, ids)
    systems: dict[str, list[int | None]] = {}

    def rank_of(found: list[str], j: int) -> int | None:
        want = f"needle-{j:02d}"
        return found.index(want) + 1 if want in found else None

    variants = {
        "MagneticMemory default": {},
        "MagneticMemory without lexical": {"lexical_weight": 0.0},
        "MagneticMemory without entity stage": {"entity_boost": 0.0},
    }
    for name, kwargs in variants.items():
        systems[name] = [
            rank_of([h.id for h in memory.search(q, vector=qvecs[j], k=10, **kwargs)], j)
            for j, (_, q) in enumerate(NEEDLES)
        ]
    ranks = []
    for j in range(len(NEEDLES)):
        sims = vecs @ qvecs[j]
        top = np.argsort(-sims, kind="stable")[:10]
        ranks.append(rank_of([ids[i] for i in top], j))
    systems["flat exact (dense)"] = ranks
    memory.close()
    return {
        "haystack": haystack,
        "needles": len(NEEDLES),
        "systems": systems,
        "found_top3": {
            s: sum(1 for r in v if r is not None and r <= TOP) for s, v in systems.items()
        },
    }


def main(argv: list[str] | None = None) -> None:
    """Run and write ``needles.json`` / ``needles.md``."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--haystack", type=int, default=10_000)
    ap.add_argument("--smoke", action="store_true", help="300 passages, hashing vectors")
    ap.add_argument("--out", type=Path, default=common.RESULTS)
    args = ap.parse_args(argv)
    res = run(300 if args.smoke else args.haystack, args.smoke)
    for name, found in res["found_top3"].items():
        print(f"{name:>40}: {found}/{res['needles']} in the top {TOP}")
    table = common.markdown_table(
        ["system", f"needles in top {TOP}", "ranks (1-based; - = not in top 10)"],
        [
            [
                s,
                f"{res['found_top3'][s]}/{res['needles']}",
                " ".join("-" if r is None else str(r) for r in ranks),
            ]
            for s, ranks in res["systems"].items()
        ],
    )
    table += "\nNeedles and queries:\n\n" + common.markdown_table(
        ["#", "needle", "query"], [[j, n, q] for j, (n, q) in enumerate(NEEDLES)]
    )
    common.write_results(
        args.out,
        "needles",
        {**res, "pairs": NEEDLES},
        table,
        f"Needles in a {res['haystack']}-passage Reuters haystack",
    )


if __name__ == "__main__":
    main()
