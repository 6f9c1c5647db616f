"""How the reference scorer's strictness maps to a cosine threshold: the calibration, re-run.

    python benchmarks/reference_calibration.py [--embedder all-MiniLM-L6-v2]

Embeds 22 pairs of name variants (two spellings of one entity: "R. Downey Jr." / "Robert Downey
Jr.") and 20 near-miss non-matches (two entities with similar names: "Chris Evans" / "Chris
Pratt"), prints each pair's cosine as a Markdown table (the one in docs/scorers.md), then, for
each strictness level, the threshold skynet.scorers.reference.threshold_for gives and how many
pairs of each kind it decides wrongly. No model is called but the embedder; nothing is asserted.

The anchors in reference.CALIBRATION come from this set: at strictness 0 every variant counts as
equal (below the lowest variant cosine), at 0.5 the set is split with the fewest errors, at 1 no
non-match counts as equal (above the highest non-match cosine).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from skynet.scorers.embed import DEFAULT_EMBEDDER, get_embedder  # noqa: E402
from skynet.scorers.reference import STRICTNESS_LEVELS, threshold_for  # noqa: E402

VARIANTS = [
    ("R. Downey Jr.", "Robert Downey Jr."),
    ("Acme Corp", "Acme Corporation"),
    ("NYC", "New York City"),
    ("J.R.R. Tolkien", "John Ronald Reuel Tolkien"),
    ("Dr. Martin Luther King Jr.", "Martin Luther King Jr."),
    ("Bill Gates", "William H. Gates"),
    ("S. Johansson", "Scarlett Johansson"),
    ("USA", "United States of America"),
    ("Acme Inc.", "Acme Corporation"),
    ("UK", "United Kingdom"),
    ("Samuel L. Jackson", "Samuel Jackson"),
    ("Alphabet Inc.", "Alphabet"),
    ("The Beatles", "Beatles"),
    ("Pfizer Inc.", "Pfizer"),
    ("J. K. Rowling", "Joanne Rowling"),
    ("Leonardo DiCaprio", "Leo DiCaprio"),
    ("MIT", "Massachusetts Institute of Technology"),
    ("Tom Cruise", "Thomas Cruise Mapother IV"),
    ("Mark Ruffalo", "Mark Alan Ruffalo"),
    ("Johnson & Johnson", "Johnson and Johnson"),
    ("St. Louis", "Saint Louis"),
    ("Warner Bros.", "Warner Brothers"),
]
NON_MATCHES = [
    ("Robert Downey Jr.", "Robert Downey Sr."),
    ("Chris Evans", "Chris Pratt"),
    ("Chris Hemsworth", "Liam Hemsworth"),
    ("George W. Bush", "George H. W. Bush"),
    ("Robert Downey Jr.", "Chris Evans"),
    ("Acme Corporation", "Apex Corporation"),
    ("New York City", "New Jersey"),
    ("Michael Jordan", "Michael B. Jordan"),
    ("Emma Stone", "Emma Watson"),
    ("Microsoft", "Apple"),
    ("Tom Hanks", "Tom Hardy"),
    ("Ryan Gosling", "Ryan Reynolds"),
    ("Paris", "London"),
    ("Pfizer", "Moderna"),
    ("Samuel L. Jackson", "Michael Jackson"),
    ("Warner Bros.", "Universal Pictures"),
    ("Jennifer Lopez", "Jennifer Lawrence"),
    ("UK", "USA"),
    ("Austria", "Australia"),
    ("John Adams", "John Quincy Adams"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default=DEFAULT_EMBEDDER)
    args = parser.parse_args()
    embedder = get_embedder(args.embedder)
    assert embedder is not None, "give an embedder, not none"
    cosines: dict[str, list[tuple[float, str, str]]] = {}
    for kind, pairs in (("variant", VARIANTS), ("non-match", NON_MATCHES)):
        rows = embedder.embed([text for pair in pairs for text in pair])
        cosines[kind] = [
            (float(rows[2 * k] @ rows[2 * k + 1]), a, b) for k, (a, b) in enumerate(pairs)
        ]
    print(f"embedder {embedder.name}\n")
    print("| kind | a | b | cosine |\n|---|---|---|---|")
    for kind, found in cosines.items():
        for value, a, b in sorted(found, reverse=True):
            print(f"| {kind} | {a} | {b} | {value:.3f} |")
    print("\n| strictness | threshold | variants refused | non-matches accepted |")
    print("|---|---|---|---|")
    levels = {0.0: "0", **{v: f"{v:g} ({k})" for k, v in STRICTNESS_LEVELS.items()}, 1.0: "1"}
    for strictness, label in sorted(levels.items()):
        threshold = threshold_for(strictness)
        refused = sum(value < threshold for value, _, _ in cosines["variant"])
        accepted = sum(value >= threshold for value, _, _ in cosines["non-match"])
        print(
            f"| {label} | {threshold:.3f} | {refused} of {len(VARIANTS)} | "
            f"{accepted} of {len(NON_MATCHES)} |"
        )


if __name__ == "__main__":
    main()
