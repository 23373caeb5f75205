"""Persona seeds: a line or two that the profile step grows into a person.

A few are built in; `--seeds FILE` reads others (a text file with one seed a
line, or a HaluMem-style JSONL whose lines carry `persona_info` or `seed`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

BUILT_IN: tuple[str, ...] = (
    "A nurse in her late twenties who works night shifts and is training for a half marathon.",
    "A retired secondary-school chemistry teacher who restores old bicycles and has two "
    "grandchildren.",
    "A freelance illustrator in his thirties who moved to a new city for his partner's job.",
    "A junior software engineer at a logistics start-up who is learning Spanish and cooks a lot.",
    "A small bakery owner in her forties balancing the business with caring for her mother.",
    "A graduate student in marine biology who plays in a jazz band on weekends.",
    "A sales manager in his fifties recovering from knee surgery and planning to change careers.",
    "A primary-school teacher who volunteers at an animal shelter and is saving for a house.",
    "A physiotherapist who recently became a father and is trying to sleep more.",
    "An accountant in her thirties who took up rock climbing and is thinking about a sabbatical.",
    "A civil engineer who commutes by train, grows vegetables and has a mild gluten intolerance.",
    "A music producer in his twenties who shares a flat with two friends and has tinnitus.",
)


def load_seeds(path: Path) -> list[str]:
    """Seeds from a file: JSONL (`persona_info` or `seed` of each line) or plain text
    (one seed a line; blank lines and lines starting with # skipped)."""
    out: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("{"):
            row = json.loads(line)
            value = row.get("seed") or row.get("persona_info")
            if value:
                out.append(str(value) if not isinstance(value, dict) else json.dumps(value))
            continue
        out.append(line)
    return out


def pick(seeds: list[str], n: int) -> list[str]:
    """`n` seeds: the given ones in order, then again with a variation number (so
    each persona gets a seed, and an id, of its own)."""
    if not seeds:
        raise ValueError("no persona seeds")
    out = []
    for i in range(n):
        seed, round_ = seeds[i % len(seeds)], i // len(seeds)
        out.append(seed if round_ == 0 else f"{seed} (variation {round_ + 1})")
    return out


def persona_id(index: int, seed: str) -> str:
    """A stable id: position and a hash of the seed, so a resumed run with the same
    seeds finds its caches and one with other seeds does not."""
    digest = hashlib.sha1(seed.encode("utf-8")).hexdigest()[:8]
    return f"synth-{index:03d}-{digest}"
