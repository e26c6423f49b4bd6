"""BLAST: nucleotide queries with planted matches searched against a generated database (NCBI BLAST+).

The stages (functions of this module, named as their stages), as in the ASA paper's BLAST workflow (split
the input, search the chunks in parallel, merge)::

    makeblastdb (1) -> blastn (one per chunk of queries) -> merge (1)

- ``makeblastdb``: ``makeblastdb -in subjects.fa -dbtype nucl -parse_seqids -out db/subjects``, and the
  queries split into ``size`` chunk files (``chunks/chunk_NNNN.fa``);
- ``blastn``: ``blastn -task blastn -query chunks/chunk_NNNN.fa -db db/subjects -evalue 1e-10 -dust no
  -outfmt "6 qseqid sseqid pident length mismatch gapopen qstart qend sstart send evalue bitscore"`` into
  ``hits/chunk_NNNN.tsv``;
- ``merge``: the chunks' hits in one table, ``hits.tsv``.

Input (:func:`generate`, deterministic for a seed): ``subjects.fa``, 60 random subject sequences of
5,000 bases; ``queries.fa``, ``size`` chunks of 7 queries of 500 bases: 6 carry a fragment of 120-300
bases copied from a random subject (on either strand) with substitutions at 0, 2, 5, 8 or 10 % of its
positions (none in its first and last 8 bases, so the local alignment spans the whole fragment), amid
random flanks, with 12 ``N`` (matching nothing) on each side of it so that no alignment runs past it by
chance; 1 is a decoy with no planted match. ``truth.json`` records every plant.

:func:`verify` checks that every planted fragment is the query's best hit, in the right subject, on the
right strand, spanning exactly the planted subject range, with the planted identity (100 x (length -
substitutions) / length, to BLAST's three decimals), and that no decoy has a hit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from elastic.front.tasks import task
from elastic.workflows.dataflow import Check, Submitter, Verification, run_program

__all__ = [
    "COLUMNS",
    "STAGES",
    "BlastInput",
    "BlastOutput",
    "blastn",
    "generate",
    "makeblastdb",
    "merge",
    "search",
    "verify",
]

STAGES = ("makeblastdb", "blastn", "merge")
"""The stages in order."""

COLUMNS: tuple[str, ...] = ("qseqid", "sseqid", "pident", "length", "mismatch", "gapopen")
COLUMNS += ("qstart", "qend", "sstart", "send", "evalue", "bitscore")
"""Columns of the hit tables (``-outfmt 6`` with these fields)."""

_SUBJECTS, _SUBJECT_LENGTH = 60, 5000
_PLANTED_PER_CHUNK, _DECOYS_PER_CHUNK, _QUERY_LENGTH = 6, 1, 500
_IDENTITIES = (100.0, 98.0, 95.0, 92.0, 90.0)
_EDGE = 8
_GUARD = 12
IDENTITY_TOLERANCE = 0.01
"""Largest difference, in percentage points, between a hit's identity and the planted one."""


@dataclass(frozen=True, slots=True)
class BlastInput:
    """The generated input: the run folder and the number of query chunks (the blastn stage's width)."""

    folder: str
    chunks: int


@dataclass(frozen=True, slots=True)
class BlastOutput:
    """What the workflow made: the merged hit table and its number of hits."""

    hits: str
    count: int


def _chunk(i: int) -> str:
    return f"chunk_{i:04d}"


# --- stages --------------------------------------------------------------------------------------


@task
def makeblastdb(inp: BlastInput) -> int:
    """Narrow: format the database and split the queries into chunk files; returns the chunk count."""
    folder = Path(inp.folder)
    run_program(
        ["makeblastdb", "-in", "subjects.fa", "-dbtype", "nucl", "-parse_seqids", "-out", "db/subjects"],
        cwd=folder,
    )
    records = folder.joinpath("queries.fa").read_text().split(">")[1:]
    per_chunk = -(-len(records) // inp.chunks)
    (folder / "chunks").mkdir(exist_ok=True)
    for i in range(inp.chunks):
        part = records[i * per_chunk : (i + 1) * per_chunk]
        folder.joinpath("chunks", f"{_chunk(i)}.fa").write_text("".join(">" + r for r in part))
    return inp.chunks


@task
def blastn(inp: BlastInput, chunk: int, _formatted: int) -> str:
    """Wide, one per chunk: search the chunk's queries against the database; returns the hit file."""
    folder = Path(inp.folder)
    (folder / "hits").mkdir(exist_ok=True)
    out = f"hits/{_chunk(chunk)}.tsv"
    run_program(
        [
            "blastn",
            "-task",
            "blastn",
            "-query",
            f"chunks/{_chunk(chunk)}.fa",
            "-db",
            "db/subjects",
            "-evalue",
            "1e-10",
            "-dust",
            "no",
            "-max_target_seqs",
            "5",
            "-num_threads",
            "1",
            "-outfmt",
            "6 " + " ".join(COLUMNS),
            "-out",
            out,
        ],
        cwd=folder,
    )
    return str(folder / out)


@task
def merge(inp: BlastInput, *hit_files: str) -> BlastOutput:
    """Narrow: the chunks' hits, in chunk order, in one table with a header (``hits.tsv``)."""
    lines = ["\t".join(COLUMNS)]
    for path in hit_files:
        lines += [ln for ln in Path(path).read_text().splitlines() if ln.strip()]
    out = Path(inp.folder, "hits.tsv")
    out.write_text("\n".join(lines) + "\n")
    return BlastOutput(str(out), len(lines) - 1)


# --- the dataflow --------------------------------------------------------------------------------


def search(submit: Submitter, inp: BlastInput) -> BlastOutput:
    """Run the BLAST dataflow (written once; see :mod:`elastic.workflows.dataflow` for ``submit``)."""
    formatted = submit.submit(makeblastdb, inp)
    hits = [submit.submit(blastn, inp, i, formatted) for i in range(inp.chunks)]
    merged: BlastOutput = submit.submit(merge, inp, *hits).result()
    return merged


# --- input and checks ----------------------------------------------------------------------------

_BASES = np.frombuffer(b"ACGT", dtype=np.uint8)
_COMPLEMENT = bytes.maketrans(b"ACGTN", b"TGCAN")


def _random_bases(rng: np.random.Generator, n: int) -> bytes:
    return _BASES[rng.integers(0, 4, size=n)].tobytes()


def _other(rng: np.random.Generator, base: int) -> int:
    """Return a base other than ``base``."""
    return int(rng.choice([b for b in b"ACGT" if b != base]))


def _fasta(name: str, seq: bytes) -> str:
    text = seq.decode()
    return f">{name}\n" + "\n".join(text[i : i + 80] for i in range(0, len(text), 80)) + "\n"


def generate(folder: Path, size: int, seed: int) -> BlastInput:
    """Write the subjects, the queries (``size`` chunks) and the truth under ``folder``."""
    rng = np.random.default_rng(seed)
    subjects = [_random_bases(rng, _SUBJECT_LENGTH) for _ in range(_SUBJECTS)]
    (folder / "subjects.fa").write_text("".join(_fasta(f"subject{i:03d}", s) for i, s in enumerate(subjects)))
    queries: list[str] = []
    truth: dict[str, dict[str, object]] = {}
    for q in range(size * (_PLANTED_PER_CHUNK + _DECOYS_PER_CHUNK)):
        name = f"query{q:05d}"
        if q % (_PLANTED_PER_CHUNK + _DECOYS_PER_CHUNK) == _PLANTED_PER_CHUNK:
            queries.append(_fasta(name, _random_bases(rng, _QUERY_LENGTH)))
            truth[name] = {"decoy": True}
            continue
        subject = int(rng.integers(_SUBJECTS))
        length = int(rng.integers(120, 301))
        start = int(rng.integers(0, _SUBJECT_LENGTH - length))
        identity = float(rng.choice(_IDENTITIES))
        fragment = bytearray(subjects[subject][start : start + length])
        subs = round(length * (1 - identity / 100))
        for pos in rng.choice(np.arange(_EDGE, length - _EDGE), size=subs, replace=False):
            fragment[pos] = _other(rng, fragment[pos])
        # a run of N (matching nothing) on each side, so no alignment runs past the fragment by chance
        left = int(rng.integers(0, _QUERY_LENGTH - length - 2 * _GUARD))
        right = _QUERY_LENGTH - length - 2 * _GUARD - left
        guard = b"N" * _GUARD
        seq = _random_bases(rng, left) + guard + bytes(fragment) + guard + _random_bases(rng, right)
        reverse = bool(rng.integers(2))
        if reverse:
            seq = seq.translate(_COMPLEMENT)[::-1]
        queries.append(_fasta(name, seq))
        truth[name] = {
            "decoy": False,
            "subject": f"subject{subject:03d}",
            "start": start + 1,  # 1-based, inclusive, as BLAST reports
            "end": start + length,
            "reverse": reverse,
            "identity": 100.0 * (length - subs) / length,
        }
    (folder / "queries.fa").write_text("".join(queries))
    (folder / "truth.json").write_text(json.dumps(truth))
    return BlastInput(str(folder), size)


def verify(inp: BlastInput, out: BlastOutput) -> Verification:
    """Check the merged hits against the planted matches (see the module docstring)."""
    import pandas as pd

    truth: dict[str, dict[str, Any]] = json.loads(Path(inp.folder, "truth.json").read_text())
    hits = pd.read_csv(out.hits, sep="\t")
    ranked = hits.sort_values("bitscore", ascending=False, kind="stable").drop_duplicates("qseqid")
    best: dict[str, dict[Any, Any]] = {str(r["qseqid"]): r for r in ranked.to_dict("records")}
    planted = {q: t for q, t in truth.items() if not t["decoy"]}
    found, wrong_identity, misplaced = [], [], []
    for query, t in planted.items():
        hit = best.get(query)
        if hit is None or hit["sseqid"] != t["subject"]:
            continue
        found.append(query)
        if abs(float(hit["pident"]) - t["identity"]) > IDENTITY_TOLERANCE:
            wrong_identity.append(f"{query}: {hit['pident']:.2f} % (planted {t['identity']:.2f} %)")
        sstart, send = int(hit["sstart"]), int(hit["send"])
        if (min(sstart, send), max(sstart, send)) != (t["start"], t["end"]) or (sstart > send) != t[
            "reverse"
        ]:
            misplaced.append(f"{query}: {hit['sseqid']}:{sstart}-{send}")
    decoys = [q for q, t in truth.items() if t["decoy"]]
    decoy_hits = sorted(set(decoys) & set(best))
    worst = max((abs(float(best[q]["pident"]) - planted[q]["identity"]) for q in found), default=0.0)
    checks = (
        Check(
            "planted matches found",
            len(found) == len(planted),
            f"{len(found)} of {len(planted)} planted fragments are their query's best hit, "
            "in the right subject",
        ),
        Check(
            "identity",
            bool(found) and not wrong_identity,
            f"largest difference {worst:.2f} points (allowed {IDENTITY_TOLERANCE:g})"
            + (f"; off: {', '.join(wrong_identity[:5])}" if wrong_identity else ""),
        ),
        Check(
            "position and strand",
            bool(found) and not misplaced,
            f"{len(found) - len(misplaced)} of {len(found)} span exactly the planted subject range, "
            "on its strand" + (f"; off: {', '.join(misplaced[:5])}" if misplaced else ""),
        ),
        Check("decoys", not decoy_hits, f"{len(decoy_hits)} of {len(decoys)} decoy queries have a hit"),
    )
    return Verification("blast", checks)
