"""How Honcho's search reads a query, and what we send it so that recall finds what was said.

A Honcho server without embeddings answers a query holding any punctuation with one literal
substring match, and any other query with the messages holding every English stem of it (an AND
of ``plainto_tsquery('english', ...)``) or the query as a substring. A person's question ("Which
units does our lab report assay results in?") thus finds nothing there, however well the note
it asks about matches. A server with embeddings also ranks by similarity, with no cut-off.

`lexemes` and `query_lexemes` parse text as the server's `to_tsvector`/`plainto_tsquery` do (the
fake Honcho searches with them; recall tells which search a server offers by them).

So a search is shaped: the question as asked (the semantic query), plus a few lexical queries
of its content words: all of them together (precise), then one word each, rarest first, to
find a note that shares only some of them. The answers are fused here: BM25 over the returned
texts against the question's stems, then the best rank a text had in any answer.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Final

import snowballstemmer

# The server's test for "special characters": any of them makes the query one substring.
SPECIAL: Final = re.compile(r"[~`!@#$%^&*()_+=\[\]{};':\"\\|,.<>/?-]")
# PostgreSQL's english.stop (the Snowball list): english_stem drops these words.
STOP_WORDS: Final = frozenset(
    """i me my myself we our ours ourselves you your yours yourself yourselves he him his himself
    she her hers herself it its itself they them their theirs themselves what which who whom this
    that these those am is are was were be been being have has had having do does did doing a an
    the and but if or because as until while of at by for with about against between into through
    during before after above below to from up down in out on off over under again further then
    once here there when where why how all any both each few more most other some such no nor not
    only own same so than too very s t can will just don should now""".split()
)
_TOKEN: Final = re.compile(
    r"(?P<email>[^\W_][\w.+-]*@[^\W_][\w-]*(?:\.[\w-]+)+)"
    r"|(?P<host>[^\W\d_][\w-]*(?:\.[^\W\d_][\w-]*)+)"
    r"|(?P<number>\d+\.\d+|\d+(?![^\W_]))"
    r"|(?P<hword>[^\W_]+(?:-[^\W_]+)+)"
    r"|(?P<word>[^\W_]+)"
)
MAX_LEXICAL_QUERIES: Final = 4
_WORD: Final = re.compile(r"[^\W_]+")
_STEMMER = snowballstemmer.stemmer("english")
_K1, _B = 1.2, 0.75


@functools.lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    """The Snowball English stem of a lower-cased word (what ``english_stem`` gives)."""
    return str(_STEMMER.stemWord(word))


def content_words(text: str) -> list[str]:
    """The distinct words of `text` that are not stop words, lower-cased, in order."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        if word not in STOP_WORDS and len(word) > 1:
            seen.setdefault(word)
    return list(seen)


@functools.lru_cache(maxsize=65_536)  # a message's content never changes: parse it once
def lexemes(content: str) -> dict[str, list[int]]:
    """``to_tsvector('english', content)``: each lexeme and its word positions (from 1)."""
    found: dict[str, list[int]] = {}
    position = 0
    for token in _tokens(content):
        position += 1
        if token is not None:
            found.setdefault(token, []).append(position)
    return found


def query_lexemes(query: str) -> list[str]:
    """``plainto_tsquery('english', query)``: the distinct lexemes, in order (empty: no match)."""
    seen: dict[str, None] = {}
    for token in _tokens(query):
        if token is not None:
            seen.setdefault(token)
    return list(seen)


def shaped_queries(question: str, max_lexical: int = MAX_LEXICAL_QUERIES) -> list[str]:
    """The question as asked, then at most `max_lexical` punctuation-free queries of its words.

    Rarity is judged by length (longer words are rarer, in any language's usage); words of one
    stem count once. Queries are distinct, so a plain question is not sent twice.
    """
    words = content_words(question)
    by_stem: dict[str, str] = {}
    for word in words:
        by_stem.setdefault(stem(word), word)
    distinct = list(by_stem.values())
    lexical: list[str] = []
    if len(distinct) > 1:
        lexical.append(" ".join(distinct))
    rarest = sorted(distinct, key=lambda w: (-len(w), distinct.index(w)))
    lexical += rarest
    queries: list[str] = []
    for query in [question, *lexical[:max_lexical]]:
        if query and query not in queries:
            queries.append(query)
    return queries


def fused_order(question: str, answers: Sequence[Sequence[tuple[str, str]]]) -> list[str]:
    """Fuse ranked answers of `(key, text)` pairs into the relevant keys, best first.

    A key ranks by BM25 of the question's stems over the distinct texts; ties by the best
    reciprocal rank it had in any answer, then by first appearance. A text that shares no stem
    with the question is dropped: a server with embeddings returns every message of the scope,
    with no similarity cut-off and no score, so its order alone cannot tell a paraphrase from
    whatever else is stored (in a scope of one message, both answers are that message).
    """
    texts: dict[str, str] = {}
    best_rank: dict[str, float] = {}
    for answer in answers:
        for rank, (key, text) in enumerate(answer, start=1):
            texts.setdefault(key, text)
            best_rank[key] = max(best_rank.get(key, 0.0), 1.0 / (60 + rank))
    keys = list(texts)
    scores = dict(
        zip(
            keys,
            bm25({stem(w) for w in content_words(question)}, list(texts.values())),
            strict=True,
        )
    )
    order = {key: n for n, key in enumerate(keys)}
    relevant = [key for key in keys if scores[key] > 0]
    return sorted(relevant, key=lambda k: (-scores[k], -best_rank[k], order[k]))


def bm25(terms: set[str], texts: Sequence[str]) -> list[float]:
    """Okapi BM25 (k1 1.2, b 0.75) of each text for `terms`, over `texts` as the corpus."""
    bags = [Counter(stem(w) for w in _WORD.findall(text.lower())) for text in texts]
    lengths = [sum(bag.values()) for bag in bags]
    average = (sum(lengths) / len(lengths)) if lengths else 0.0
    scores = []
    for bag, length in zip(bags, lengths, strict=True):
        score = 0.0
        for term in terms:
            frequency = bag.get(term, 0)
            if frequency:
                held = sum(1 for other in bags if term in other)
                idf = math.log(1 + (len(bags) - held + 0.5) / (held + 0.5))
                norm = frequency + _K1 * (1 - _B + _B * length / (average or 1))
                score += idf * frequency * (_K1 + 1) / norm
        scores.append(score)
    return scores


def matches_lexically(query: str, text: str) -> bool:
    """Whether a server without embeddings would return `text` for `query`."""
    if query.lower() in text.lower():
        return True
    if SPECIAL.search(query):
        return False
    wanted = query_lexemes(query)
    return bool(wanted) and all(term in lexemes(text) for term in wanted)


def _tokens(text: str) -> list[str | None]:
    """Each token's lexeme in order, None for a stop word (it still takes a position)."""
    out: list[str | None] = []
    for match in _TOKEN.finditer(text):
        kind, token = match.lastgroup, match.group().lower()
        if kind in ("email", "host", "number"):
            out.append(token)
        elif kind == "hword":
            out.append(stem(token))
            out.extend(_word(part) for part in token.split("-"))
        else:
            out.append(_word(token))
    return out


def _word(token: str) -> str | None:
    if any(c.isdigit() for c in token):  # numbers and "numwords" such as 3rd: not stemmed
        return token
    if token in STOP_WORDS:
        return None
    return stem(token)
