"""Porter stems, from PyStemmer (the Snowball project's C stemmers).

The algorithm is Snowball's "porter": M. F. Porter's original 1980 stemmer, the one
SQLite FTS5's `porter` tokenizer implements, so a term's stem here is the term the
SQLite keyword index holds (`sqlite_sql.rankable` looks terms up in its vocabulary
by it). Words of one or two letters are kept as they are, as FTS5 and nltk do
("is", "as", "us" are not cut to "i", "a", "u").

Nothing stores these stems: the keyword indexes stem on their own (FTS5's porter
tokenizer; PostgreSQL's snowball dictionary), so changing this function needs no
migration. The metrics that use it (evidence coverage, LoCoMo token F1, the judges'
word checks) compare stems made here on both sides.
"""

from __future__ import annotations

import threading
from functools import lru_cache

import Stemmer

_local = threading.local()  # a PyStemmer Stemmer is not thread-safe: one per thread


def _stemmer() -> Stemmer.Stemmer:
    s = getattr(_local, "stemmer", None)
    if s is None:
        s = _local.stemmer = Stemmer.Stemmer("porter")
    return s


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    w = word.lower()
    if len(w) <= 2:
        return w
    return _stemmer().stemWord(w)
