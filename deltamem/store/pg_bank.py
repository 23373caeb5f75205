"""One user's rows of a PostgreSQL table (memories or episodes), held in process
memory so that a search ranks them without PostgreSQL scoring every row.

The ranking must be the one the SQL gives (pgvector's `<=>`, `ts_rank_cd`), ids,
scores and order, so each side keeps to what can be reproduced exactly:

- Dense: pgvector's cosine distance is float32 sums in an order its build chooses
  (auto-vectorized, with or without FMA), so it is not reproduced bit for bit.
  numpy's product gives each row's cosine within `margin(dim)` of pgvector's (a
  bound on the rounding of any summation order); the rows that can be in the top k
  by pgvector's value (numpy's k-th score minus twice the margin, ties included)
  are the candidates, and PostgreSQL scores those few exactly and orders them as
  the full query did (distance, then seq).
- Keywords: the query is an OR of single lexemes (one `phraseto_tsquery` per
  term); for such a query every occurrence of a query lexeme is one cover of
  `ts_rank_cd`, of weight D, so a row's rank is `n` covers of `1 / (1 / 0.1f)`
  added one by one in double, divided by log(1 + the row's length in positions)
  (normalisation 1), cast to float4; the float4 comes back as its shortest decimal
  text, as psycopg reads it. The rows' lexemes and positions are PostgreSQL's own
  (the stored tsvector, read back). A query with a phrase (a term of several
  lexemes) is ranked in SQL.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from deltamem.store.vectors import ONE_BLAS_THREAD, Bank
from deltamem.types import SearchFilters

# a lexeme of tsvector / tsquery output: quoted, ' and \ doubled; then its positions
_LEXEME = re.compile(r"'((?:[^']|'')*)'(?::([0-9A-D,]+))?")
_WEIGHT = re.compile(r"[ABC]")
_ONE_LEXEME = re.compile(r"'((?:[^']|'')*)'")
_D_WEIGHT = float(np.float32(0.1))  # ts_rank_cd's default weight of D, a float4
_COVER = 1.0 / (0.0 + 1.0 / _D_WEIGHT)  # Cpos of a one-position cover (calc_rank_cd)


def margin(dim: int) -> float:
    """Bound on |numpy's cosine - pgvector's| for one row: each float32 dot product
    or squared norm of `dim` terms is within gamma = dim*u/(1 - dim*u) (u = 2^-24)
    of the exact value, relative to |a||b|, whatever the order of the additions;
    pgvector's cosine is then within about 2 gamma and numpy's within gamma. Four
    gammas leaves room for the double-precision steps."""
    u = 2.0**-24
    return 4.0 * dim * u / (1.0 - dim * u)


def parse_tsvector(text: str) -> tuple[dict[str, int], int] | None:
    """(lexeme -> number of positions, length as `cnt_length` counts it) of a tsvector's
    text form, or None where a position carries a weight other than D (the rank
    would weigh it otherwise)."""
    found = _LEXEME.findall(text)
    if _WEIGHT.search(text) and any(_WEIGHT.search(pos) for _, pos in found):
        return None
    counts = {lex: pos.count(",") + 1 if pos else 0 for lex, pos in found}
    return counts, sum(n or 1 for n in counts.values())


def query_lexeme(tsquery: str) -> str | bool | None:
    """A term's `phraseto_tsquery` text: its one lexeme (as tsvector text writes it),
    None where it has none, False where it is a phrase (several lexemes)."""
    if not tsquery:
        return None
    m = _ONE_LEXEME.fullmatch(tsquery)
    return m.group(1) if m else False


@dataclass
class Postings:
    """Lexeme -> (row indices, number of positions in each row), and per row the
    divisor of normalisation 1."""

    lexemes: dict[str, tuple[np.ndarray, np.ndarray]]
    log_length: np.ndarray  # float64, log(length + 1) as libm gives it

    @classmethod
    def build(cls, parsed: list[tuple[dict[str, int], int]]) -> Postings:
        codes: dict[str, int] = {}
        lex_codes: list[int] = []
        counts: list[int] = []
        sizes: list[int] = []
        for lexemes, _ in parsed:
            lex_codes += [codes.setdefault(x, len(codes)) for x in lexemes]
            counts += lexemes.values()
            sizes.append(len(lexemes))
        rows = np.repeat(np.arange(len(parsed), dtype=np.int64), sizes)
        by_lexeme = np.array(lex_codes, dtype=np.int64)
        order = np.argsort(by_lexeme, kind="stable")  # each lexeme's rows stay ascending
        rows, n = rows[order], np.array(counts, dtype=np.int64)[order]
        ends = np.cumsum(np.bincount(by_lexeme, minlength=len(codes)))
        starts = ends - np.bincount(by_lexeme, minlength=len(codes))
        lengths = np.array([length for _, length in parsed], dtype=np.int64)
        distinct = np.unique(lengths)
        logs = np.array([math.log(float(x + 1)) for x in distinct])  # libm's, as the server's
        return cls(
            {lex: (rows[starts[c] : ends[c]], n[starts[c] : ends[c]]) for lex, c in codes.items()},
            logs[np.searchsorted(distinct, lengths)] if len(lengths) else np.zeros(0),
        )


_SUMS: list[float] = [0.0]  # _SUMS[n]: n covers added one by one, as calc_rank_cd does


def _cover_sums(n: int) -> np.ndarray:
    while len(_SUMS) <= n:
        _SUMS.append(_SUMS[-1] + _COVER)
    return np.array(_SUMS[: n + 1], dtype=np.float64)


@dataclass
class PgBank(Bank):
    norms: np.ndarray = field(default_factory=lambda: np.zeros(0))  # float64 row norms
    xmins: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    parsed: list[tuple[dict[str, int], int] | None] = field(default_factory=list)
    postings: Postings | None = None  # None where a row's tsvector is not all weight D

    def merged(self, fresh: PgBank, keep: np.ndarray, at: np.ndarray) -> PgBank:
        """This bank's rows at `at` (where `keep`) and `fresh`'s rows (elsewhere), in
        the order of `keep`, which is seq order; `fresh` gives the version."""
        assert self.rowids is not None and fresh.rowids is not None
        new = np.flatnonzero(~keep)

        def mix(mine: np.ndarray, theirs: np.ndarray) -> np.ndarray:
            out = np.empty((len(keep), *mine.shape[1:]), dtype=mine.dtype)
            out[keep], out[new] = mine[at], theirs
            return out

        parsed: list[tuple[dict[str, int], int] | None] = [None] * len(keep)
        ids: list[str] = [""] * len(keep)
        for i, j in zip(np.flatnonzero(keep).tolist(), at.tolist(), strict=True):
            parsed[i], ids[i] = self.parsed[j], self.ids[j]
        for i, j in zip(new.tolist(), range(len(new)), strict=True):
            parsed[i], ids[i] = fresh.parsed[j], fresh.ids[j]
        return PgBank(
            version=fresh.version,
            ids=ids,
            matrix=mix(self.matrix, fresh.matrix),
            agent=mix(self.agent, fresh.agent),
            mtype=mix(self.mtype, fresh.mtype),
            session=mix(self.session, fresh.session),
            ts=mix(self.ts, fresh.ts),
            rowids=mix(self.rowids, fresh.rowids),
            norms=mix(self.norms, fresh.norms),
            xmins=mix(self.xmins, fresh.xmins),
            parsed=parsed,
            postings=None if None in parsed else Postings.build(cast(list, parsed)),
        )

    def candidates(
        self,
        vector: np.ndarray,
        k: int,
        agent_id: str | None,
        filters: SearchFilters | None,
    ) -> list[str] | None:
        """Ids of the rows in scope that can be among the k nearest by pgvector's
        cosine distance (see the module's doc), or None where numpy's cosine cannot
        be bounded (a zero vector: pgvector gives NaN)."""
        q = np.asarray(vector, dtype=np.float32)
        qnorm = float(np.sqrt(np.dot(q.astype(np.float64), q.astype(np.float64))))
        if not self.ids or k <= 0:
            return []
        if qnorm == 0.0 or not math.isfinite(qnorm) or not (self.norms > 0).all():
            return None
        with ONE_BLAS_THREAD:
            scores = (self.matrix @ q) / (self.norms * qnorm)
        mask = self.mask(agent_id, filters)
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)
            k = min(k, int(mask.sum()))
            if k == 0:
                return []
        if k >= len(scores):
            kth = float(scores[np.isfinite(scores)].min())
        else:
            kth = float(np.partition(scores, len(scores) - k)[len(scores) - k])
        near = np.flatnonzero(scores >= kth - 2.0 * margin(self.matrix.shape[1]))
        return [self.ids[i] for i in near]

    def keyword_rank(
        self,
        lexemes: list[str],
        k: int,
        agent_id: str | None,
        filters: SearchFilters | None,
    ) -> list[tuple[str, float]]:
        """ts_rank_cd(tsv, OR of the lexemes, 1) of the rows in scope holding any of
        them, best first, ties by seq; at most k."""
        assert self.postings is not None and self.rowids is not None
        found = [
            self.postings.lexemes[x] for x in dict.fromkeys(lexemes) if x in self.postings.lexemes
        ]
        if not found or k <= 0:
            return []
        rows = np.concatenate([r for r, _ in found])
        covers = np.concatenate([c for _, c in found])
        docs, where = np.unique(rows, return_inverse=True)
        n = np.bincount(where, weights=covers, minlength=len(docs)).astype(np.int64)
        mask = self.mask(agent_id, filters)
        if mask is not None:
            keep = mask[docs]
            docs, n = docs[keep], n[keep]
        if len(docs) == 0:
            return []
        rank = (_cover_sums(int(n.max()))[n] / self.postings.log_length[docs]).astype(np.float32)
        order = np.lexsort((self.rowids[docs], -rank))[:k]
        return [(self.ids[docs[i]], float(str(rank[i]))) for i in order]
