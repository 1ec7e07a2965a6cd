"""Documents that stand alone: nothing in src/ or docs/ (or the README) cites a document
that is not in the repository: the seed documents by number, the product notes, or a
path outside the tree. What such a citation stood for is written down in docs/ instead
(docs/protocol.md "Admission", docs/architecture.md "At-least-once, leased")."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEED = re.compile(
    r"\bseeds?\s*(?:§\s*)?0\d\d\b"     # "seed 000", "seed 003 §1", "seeds 002"
    r"|\bseed\s*@\w+"                  # "seed @enqueue"
    r"|\bthe\s+seed(?:'s)?\b(?!\s+nodes?\b)"  # "the seed's enqueue" (not cluster seed nodes)
    r"|\bin\s+the\s+seed\b",
    re.IGNORECASE,
)
NOTES = re.compile(r"\bLESSONS\b|\bBRIEF\.md\b|\bSTYLE\.md\b|/work/shared\b")
OUTSIDE = re.compile(f"{SEED.pattern}|{NOTES.pattern}", re.IGNORECASE)

# Every file of src/ and docs/ is checked for the seed documents; the product notes are
# checked in all of src/ and docs.
TOPS = ("src", "docs")
NOTE_TOPS = ("src", "docs")


def documents(tops: tuple[str, ...]) -> list[Path]:
    out = [ROOT / "README.md"]
    for top in tops:
        out += sorted(p for p in (ROOT / top).rglob("*")
                      if p.is_file() and p.suffix in {".py", ".md", ".lua", ".sql", ".html", ".js", ".css"}
                      and "egg-info" not in p.parts)
    return out


def test_the_pattern_catches_each_kind_of_citation() -> None:
    for text in ("(seed 000 §3)", "seed 003 §1", "Seed 002", "(seed @enqueue)",
                 "the seed's `enqueue`", "in the seed)", "LESSONS: 1 in 9", "see BRIEF.md",
                 "/work/shared/seeds/000_x.txt"):
        assert OUTSIDE.search(text), text
    for text in ("a list of seed nodes", "then the seed nodes", "chaos.py --seed 174475100",
                 "seed: 42", "the seeds of a random generator"):
        assert not OUTSIDE.search(text), text


def _hits(pattern: re.Pattern[str], paths: list[Path]) -> list[str]:
    return [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
            for path in paths
            for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
            if pattern.search(line)]


def test_no_document_cites_a_seed_document() -> None:
    paths = documents(TOPS)
    assert len(paths) > 100  # the walk found the tree, both packages
    hits = _hits(SEED, paths)
    assert not hits, "cites a seed document (not in the repository):\n" + "\n".join(hits)


def test_no_document_cites_the_product_notes() -> None:
    hits = _hits(NOTES, documents(NOTE_TOPS))
    assert not hits, "cites a document outside the repository:\n" + "\n".join(hits)
