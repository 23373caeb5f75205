"""FTS5's bm25() over one user's rows, computed in process memory.

Keyword search ranked by `bm25()` in SQL costs a few microseconds per matching row
(FTS5 reads each row's size and position lists), and a user's own name matches
thousands of their rows: at 10k memories it was about three quarters of a search.
Here a user's rows are held as postings (term -> rows, with counts) beside the
vector bank and reloaded with it, and bm25 is computed with numpy, so that a query
costs two small lookups (the table's row and token totals, each term's document
count) and a few array operations.

The scores are FTS5's to the bit, so the ranking is the one SQL gives:

- the tokens are FTS5's own: each row's text (read back from the FTS table) is
  tokenized by an FTS5 table with the same tokenizer in a private in-memory
  database, and so is each query term;
- the statistics are FTS5's: the row count and token total from the table's
  averages record, each term's document count from its vocabulary table;
- the formula and the order of its floating-point operations are those of
  `fts5Bm25Function` (SQLite 3.40), and ties are broken as the SQL's
  `ORDER BY rank LIMIT k` breaks them, by rowid;
- `formula_matches()` checks all of this against SQLite's own bm25() once per
  process; where it does not match (another SQLite version), or a query term is
  not one token (FTS5 would match a phrase), the store ranks in SQL as before.
"""

from __future__ import annotations

import math
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

K1 = 1.2
B = 0.75
TOKENIZER = "porter unicode61"  # the tokenizer of memories_fts and episodes_fts


# --- FTS5's tokens ----------------------------------------------------------------------
def token_rows(texts: Sequence[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(token, text index, count) of every token FTS5 (porter unicode61) makes of the
    texts, by text index: three aligned columns."""
    if not texts:
        return [], np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
    db = sqlite3.connect(":memory:", isolation_level=None)
    try:
        db.execute(f"CREATE VIRTUAL TABLE t USING fts5 (x, tokenize = '{TOKENIZER}')")
        db.execute("CREATE VIRTUAL TABLE v USING fts5vocab (t, 'instance')")
        db.execute("BEGIN")
        db.executemany("INSERT INTO t (rowid, x) VALUES (?, ?)", enumerate(texts))
        db.execute("COMMIT")
        rows = db.execute("SELECT term, doc, count(*) FROM v GROUP BY doc, term").fetchall()
    finally:
        db.close()
    if not rows:
        return [], np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
    tokens, docs, counts = zip(*rows, strict=True)
    return list(tokens), np.array(docs, dtype=np.int64), np.array(counts, dtype=np.float64)


def tokenize(texts: Sequence[str]) -> list[dict[str, int]]:
    """Each text's tokens as FTS5 makes them, with their counts."""
    out: list[dict[str, int]] = [{} for _ in texts]
    tokens, docs, counts = token_rows(texts)
    for token, doc, n in zip(tokens, docs, counts, strict=True):
        out[int(doc)][token] = int(n)
    return out


@lru_cache(maxsize=8192)
def query_token(term: str) -> str | None:
    """The one token FTS5 makes of a query term, or None where it makes none or several
    (a phrase, which the in-memory ranking does not do)."""
    tokens = tokenize([term])[0]
    return next(iter(tokens)) if len(tokens) == 1 and sum(tokens.values()) == 1 else None


# --- a user's postings ----------------------------------------------------------------
class Vocabulary:
    """Token -> id, growing only, shared by the successive indexes of one user's
    table, so a row's token ids stay valid from one load to the next."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self._lock = threading.Lock()

    def of(self, tokens: list[str]) -> np.ndarray:
        """The tokens' ids, new tokens given the next ones."""
        with self._lock:
            for token in sorted(set(tokens) - self.ids.keys()):
                self.ids[token] = len(self.ids)
            ids = self.ids
            return np.fromiter((ids[t] for t in tokens), dtype=np.int64, count=len(tokens))


@dataclass(frozen=True)
class DocTokens:
    ids: np.ndarray  # int64 token ids
    counts: np.ndarray  # float64 occurrences of each
    length: int  # tokens in the row


@dataclass
class TermIndex:
    """Postings of one user's rows of a table, in the bank's row order."""

    vocab: Vocabulary
    texts: dict[str, DocTokens]  # each distinct row text's tokens (reused by the next load)
    lengths: np.ndarray  # (n,) float64 tokens per row
    # (len(vocab) + 1,) int64: token id t's postings are docs[starts[t]:starts[t + 1]]
    starts: np.ndarray
    docs: np.ndarray  # row positions, by token id then row
    counts: np.ndarray  # float64 occurrences, aligned with docs

    @classmethod
    def build(cls, texts: Sequence[str], previous: TermIndex | None = None) -> TermIndex:
        """Index the rows' texts; texts the previous index holds are not tokenized again."""
        vocab = previous.vocab if previous is not None else Vocabulary()
        known = previous.texts if previous is not None else {}
        fresh = sorted({t for t in texts if t not in known})
        table = {t: known[t] for t in set(texts) if t in known}
        tokens, of_text, occurrences = token_rows(fresh)
        ids = vocab.of(tokens)
        bounds = np.searchsorted(of_text, np.arange(len(fresh) + 1))
        sizes = np.bincount(of_text, weights=occurrences, minlength=len(fresh))
        for i, text in enumerate(fresh):
            a, b = bounds[i], bounds[i + 1]
            table[text] = DocTokens(ids=ids[a:b], counts=occurrences[a:b], length=int(sizes[i]))
        rows = [table[t] for t in texts]
        n_vocab = len(vocab.ids)
        if rows:
            all_ids = np.concatenate([r.ids for r in rows])
            counts = np.concatenate([r.counts for r in rows])
            docs = np.repeat(np.arange(len(rows)), [len(r.ids) for r in rows])
        else:
            all_ids = np.zeros(0, dtype=np.int64)
            counts = np.zeros(0, dtype=np.float64)
            docs = np.zeros(0, dtype=np.int64)
        order = np.lexsort((docs, all_ids))
        starts = np.zeros(n_vocab + 1, dtype=np.int64)
        np.cumsum(np.bincount(all_ids, minlength=n_vocab), out=starts[1:])
        return cls(
            vocab=vocab,
            texts=table,
            lengths=np.array([r.length for r in rows], dtype=np.float64),
            starts=starts,
            docs=docs[order],
            counts=counts[order],
        )

    def postings(self, token: str) -> tuple[np.ndarray, np.ndarray]:
        t = self.vocab.ids.get(token)
        if t is None or t + 1 >= len(self.starts):
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        a, b = self.starts[t], self.starts[t + 1]
        return self.docs[a:b], self.counts[a:b]


# --- FTS5's bm25 --------------------------------------------------------------------------
@dataclass(frozen=True)
class TableStats:
    """What bm25() reads of the whole FTS table (every user's rows)."""

    rows: int
    tokens: int
    hits: dict[str, int]  # token -> rows holding it


def averages(block: bytes) -> tuple[int, int]:
    """(rows, tokens of all columns) from an FTS5 averages record: a varint row count,
    then a varint token total per column (SQLite's varint format)."""
    values: list[int] = []
    i = 0
    while i < len(block):
        v = 0
        for j in range(9):
            byte = block[i]
            i += 1
            if j == 8:
                v = (v << 8) | byte
                break
            v = (v << 7) | (byte & 0x7F)
            if byte < 0x80:
                break
        values.append(v)
    return (values[0], sum(values[1:])) if values else (0, 0)


def idf(rows: int, hits: int) -> float:
    value = math.log((rows - hits + 0.5) / (hits + 0.5))
    return value if value > 0.0 else 1e-6


def bm25(
    index: TermIndex, tokens: Sequence[str], stats: TableStats
) -> tuple[np.ndarray, np.ndarray]:
    """(row positions, score) of the rows holding any token; score = -bm25(), as
    `fts5Bm25Function` computes it, one phrase per token in query order."""
    found = [index.postings(t) for t in tokens]
    hit = [d for d, _ in found if len(d)]
    if not hit or stats.rows <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
    docs = np.unique(np.concatenate(hit))
    avgdl = float(stats.tokens) / float(stats.rows)
    norm = K1 * (1 - B + B * index.lengths[docs] / avgdl)
    score = np.zeros(len(docs), dtype=np.float64)
    for token, (d, counts) in zip(tokens, found, strict=True):
        freq = np.zeros(len(docs), dtype=np.float64)
        freq[np.searchsorted(docs, d)] = counts
        score += idf(stats.rows, stats.hits.get(token, 0)) * ((freq * (K1 + 1.0)) / (freq + norm))
    return docs, score


def top(
    docs: np.ndarray, score: np.ndarray, rowids: np.ndarray, mask: np.ndarray | None, k: int
) -> list[tuple[int, float]]:
    """(row position, score) of the best k (all for k < 0, as SQL's LIMIT), as
    `ORDER BY bm25 LIMIT k` gives them: best score first (bm25() is its negation,
    ascending), ties by rowid (the order the scan meets them in)."""
    if mask is not None:
        keep = mask[docs]
        docs, score = docs[keep], score[keep]
    order = np.lexsort((rowids[docs], -score))
    if k >= 0:
        order = order[:k]
    return [(int(d), float(s)) for d, s in zip(docs[order], score[order], strict=True)]


# --- is this SQLite's bm25 the one above? --------------------------------------------------
_CHECK_ROWS = [
    "Martin likes jazz concerts and jazz records.",
    "Sarah visited the Lisbon office twice, then Lisbon again.",
    "Martin's cat is called Zorro.",
    "Running, runner, runs: Martin runs marathons.",
    "Priya studies marine biology at the university of Lisbon.",
    "Tea.",
]
_CHECK_QUERIES = [["martin"], ["lisbon", "jazz"], ["run", "martin", "tea"], ["zorro", "lisbon"]]
_checked: dict[str, bool] = {}


def formula_matches() -> bool:
    """Whether the bm25 above gives this SQLite's FTS5 bm25() scores and order exactly
    (checked once per process, on a small table in a private in-memory database)."""
    if "ok" not in _checked:
        _checked["ok"] = _check()
    return _checked["ok"]


def _check() -> bool:
    db = sqlite3.connect(":memory:", isolation_level=None)
    try:
        db.execute(f"CREATE VIRTUAL TABLE f USING fts5 (a, b, tokenize = '{TOKENIZER}')")
        db.execute("CREATE VIRTUAL TABLE fv USING fts5vocab (f, 'row')")
        rows = [(i + 1, text, "keyword " * (i % 3)) for i, text in enumerate(_CHECK_ROWS)]
        db.executemany("INSERT INTO f (rowid, a, b) VALUES (?,?,?)", rows)
        index = TermIndex.build([f"{a} {b}" for _, a, b in rows])
        block = db.execute("SELECT block FROM f_data WHERE id=1").fetchone()[0]
        n_rows, n_tokens = averages(block)
        rowids = np.array([r for r, _, _ in rows], dtype=np.int64)
        for terms in _CHECK_QUERIES:
            tokens = [query_token(t) for t in terms]
            if any(t is None for t in tokens):
                return False
            marks = ",".join("?" * len(tokens))
            hits = dict(db.execute(f"SELECT term, doc FROM fv WHERE term IN ({marks})", tokens))
            stats = TableStats(n_rows, n_tokens, hits)
            docs, score = bm25(index, [t for t in tokens if t is not None], stats)
            mine = [(int(rowids[d]), s) for d, s in top(docs, score, rowids, None, 10)]
            query = " OR ".join(f'"{t}"' for t in terms)
            sql = db.execute(
                "SELECT rowid, bm25(f) AS rank FROM f WHERE f MATCH ? ORDER BY rank LIMIT 10",
                (query,),
            ).fetchall()
            if mine != [(r, -s) for r, s in sql]:
                return False
        return True
    except sqlite3.Error:
        return False
    finally:
        db.close()


def texts_of(rows: Iterable[sqlite3.Row], columns: Sequence[str]) -> list[str]:
    """A row's FTS text as one string: its columns' texts joined by a space (a
    separator, so the tokens and their counts are those of the columns together)."""
    return [" ".join(r[c] or "" for c in columns) for r in rows]
