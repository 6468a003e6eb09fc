"""BM25 ranking of knowledge chunks (runbook sections, case summaries) for English and Chinese text.

Tokens are lowercase ASCII words (hyphen/underscore/dot compounds kept whole and split into parts,
camelCase parts added, a light English suffix stemmer) plus CJK character bigrams (a lone CJK
character is kept as a unigram). Term frequencies, document lengths and idf are computed once in
``build``; ``search`` only touches the postings of the query terms. Stdlib only.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import PurePath
from typing import Iterable

__all__ = ["Chunk", "KnowledgeIndex", "tokenize", "chunk_markdown"]

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN_RE = re.compile(rf"(?P<cjk>[{_CJK}]+)|(?P<word>[A-Za-z0-9]+(?:[-_.][A-Za-z0-9]+)*)")
_PART_RE = re.compile(r"[-_.]")
_CAMEL_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_HAS_CAMEL_RE = re.compile(r"[a-z][A-Z]")

# Question words carry no topic; "no", "not" and "down" are kept on purpose ("No space left").
_STOPWORDS = frozenset("""
a an the is are was were be been being am why what how when where which who whom whose
does do did doing to of in on for and or with it its this that these those so as at by from
i me my we our you your he she they them their can could should would will shall may might
please there here than then too very just also about into over under again any some all
""".split())
_CJK_STOP_BIGRAMS = frozenset({"为什", "什么", "怎么", "这么", "那么", "如何", "是否", "一直", "请问", "我们", "的是"})


@dataclass(frozen=True)
class Chunk:
    """One retrievable unit: a runbook section or a case summary."""

    chunk_id: str
    source_type: str  # "runbook" | "case"
    source_id: str
    title: str
    path: str
    content: str


def _stem(word: str) -> str:
    # Just enough to match "timeouts"/"timeout", "failing"/"fail", "queries"/"query".
    if not word.isalpha():
        return word
    if len(word) > 5 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith("ed"):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _word_tokens(word: str) -> list[str]:
    lower = word.lower()
    parts = [p for p in _PART_RE.split(word) if p]
    out: list[str] = []
    if len(parts) > 1:
        out.append(lower)  # the whole compound: "payment-service", "db_pool_active_connections"
    for part in parts:
        low = part.lower()
        if len(low) > 1 and low not in _STOPWORDS:
            out.append(_stem(low))
        if _HAS_CAMEL_RE.search(part):  # "OutOfMemoryError" -> out, memory, error
            for piece in _CAMEL_RE.findall(part):
                piece = piece.lower()
                if len(piece) > 1 and piece not in _STOPWORDS and piece != low:
                    out.append(_stem(piece))
    return out


def tokenize(text: str) -> list[str]:
    """Index/query terms of ``text`` (see the module docstring); empty for empty text."""
    tokens: list[str] = []
    for match in _TOKEN_RE.finditer(text or ""):
        run = match.group("cjk")
        if run is not None:
            if len(run) == 1:
                tokens.append(run)
            else:
                tokens.extend(b for b in (run[i:i + 2] for i in range(len(run) - 1)) if b not in _CJK_STOP_BIGRAMS)
        else:
            tokens.extend(_word_tokens(match.group("word")))
    return tokens


class KnowledgeIndex:
    """An immutable BM25 index over chunks; build it once, search it many times."""

    def __init__(self, *, k1: float = 1.5, b: float = 0.75) -> None:
        self.k1 = k1
        self.b = b
        self._chunks: list[Chunk] = []
        self._by_id: dict[str, int] = {}
        self._postings: dict[str, list[tuple[int, int]]] = {}
        self._lengths: list[int] = []
        self._idf: dict[str, float] = {}
        self._avgdl = 0.0

    @classmethod
    def build(cls, chunks: Iterable[Chunk], *, k1: float = 1.5, b: float = 0.75) -> KnowledgeIndex:
        """Index ``chunks`` (title + content); a duplicate ``chunk_id`` raises ``ValueError``."""
        index = cls(k1=k1, b=b)
        postings: dict[str, list[tuple[int, int]]] = {}
        for chunk in chunks:
            if chunk.chunk_id in index._by_id:
                raise ValueError(f"duplicate chunk_id {chunk.chunk_id!r}")
            doc = len(index._chunks)
            index._by_id[chunk.chunk_id] = doc
            index._chunks.append(chunk)
            counts = Counter(tokenize(chunk.title) + tokenize(chunk.content))
            index._lengths.append(sum(counts.values()))
            for term, tf in counts.items():
                postings.setdefault(term, []).append((doc, tf))
        n = len(index._chunks)
        index._postings = postings
        index._avgdl = (sum(index._lengths) / n) if n else 0.0
        # Lucene's idf variant: always positive, so a term in every chunk still counts a little.
        index._idf = {t: math.log(1 + (n - len(p) + 0.5) / (len(p) + 0.5)) for t, p in postings.items()}
        return index

    def __len__(self) -> int:
        return len(self._chunks)

    @property
    def chunks(self) -> tuple[Chunk, ...]:
        return tuple(self._chunks)

    def get(self, chunk_id: str) -> Chunk | None:
        doc = self._by_id.get(chunk_id)
        return None if doc is None else self._chunks[doc]

    def search(self, query: str, top_k: int = 5, exclude_chunk_ids: Iterable[str] = ()) -> list[tuple[Chunk, float]]:
        """The ``top_k`` best chunks for ``query`` with their BM25 score, best first.

        Chunks in ``exclude_chunk_ids`` are skipped (the tool layer passes what this run already
        returned); a query without any term, or without any match, returns ``[]``.
        """
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise ValueError(f"top_k must be a positive integer, got {top_k!r}")
        terms = set(tokenize(query or ""))
        if not terms or not self._chunks:
            return []
        excluded = {self._by_id[c] for c in exclude_chunk_ids if c in self._by_id}
        k1, b, avgdl = self.k1, self.b, self._avgdl or 1.0
        scores: dict[int, float] = {}
        for term in terms:
            postings = self._postings.get(term)
            if not postings:
                continue
            idf = self._idf[term]
            for doc, tf in postings:
                if doc in excluded:
                    continue
                norm = tf + k1 * (1 - b + b * self._lengths[doc] / avgdl)
                scores[doc] = scores.get(doc, 0.0) + idf * tf * (k1 + 1) / norm
        ranked = sorted(scores.items(), key=lambda item: (-item[1], self._chunks[item[0]].chunk_id))
        return [(self._chunks[doc], round(score, 6)) for doc, score in ranked[:top_k]]


# --- Markdown chunking ----------------------------------------------------------------------------

_H1_RE = re.compile(r"^#\s+(.+?)\s*#*\s*$")
_H2_RE = re.compile(r"^##\s+(.+?)\s*#*\s*$")
_FENCE_RE = re.compile(r"^\s*(```|~~~)")


def _split_long(text: str, heading_line: str, max_chars: int) -> list[str]:
    """Split an over-long section at blank lines, repeating its heading on every piece."""
    if len(text) <= max_chars:
        return [text]
    body = text[len(heading_line):].strip() if heading_line and text.startswith(heading_line) else text
    prefix = heading_line + "\n\n" if heading_line else ""
    budget = max(200, max_chars - len(prefix))
    pieces: list[str] = []
    current = ""
    for para in re.split(r"\n\s*\n", body):
        para = para.strip()
        if not para:
            continue
        while len(para) > budget:  # one huge paragraph: cut it hard
            if current:
                pieces.append(current)
                current = ""
            pieces.append(para[:budget])
            para = para[budget:]
        if current and len(current) + 2 + len(para) > budget:
            pieces.append(current)
            current = para
        else:
            current = f"{current}\n\n{para}" if current else para
    if current:
        pieces.append(current)
    return [prefix + p for p in pieces]


def chunk_markdown(
    path: str | PurePath,
    text: str,
    *,
    source_type: str = "runbook",
    source_id: str | None = None,
    max_chars: int = 2000,
) -> list[Chunk]:
    """Split a Markdown document into one chunk per ``## `` section (plus the text before the first).

    Every chunk carries the document title (the first ``# `` heading, else the file name) and keeps
    its own ``## `` heading line in ``content``; ``###`` sub-sections stay inside their section and
    headings inside code fences are ignored. ``chunk_id`` is ``<source_id>#<n>`` (``source_id``
    defaults to the path), numbered in document order.
    """
    path_text = PurePath(path).as_posix()
    source_id = source_id or path_text
    lines = (text or "").splitlines()
    title = None
    sections: list[tuple[str, list[str]]] = [("", [])]  # (heading line, body lines)
    in_fence = False
    for line in lines:
        if _FENCE_RE.match(line):
            in_fence = not in_fence
        elif not in_fence:
            if title is None and _H1_RE.match(line):
                title = _H1_RE.match(line).group(1)
                continue
            if _H2_RE.match(line):
                sections.append((line.strip(), []))
                continue
        sections[-1][1].append(line)
    if title is None:
        first = next((ln.strip().lstrip("#").strip() for ln in lines if ln.strip()), "")
        title = first[:120] or PurePath(path_text).stem
    chunks: list[Chunk] = []
    for heading_line, body in sections:
        body_text = "\n".join(body).strip()
        if not heading_line and not body_text:
            continue
        section = f"{heading_line}\n\n{body_text}".strip() if heading_line else body_text
        for piece in _split_long(section, heading_line, max_chars):
            chunks.append(Chunk(
                chunk_id=f"{source_id}#{len(chunks)}",
                source_type=source_type,
                source_id=source_id,
                title=title,
                path=path_text,
                content=piece,
            ))
    if not chunks:  # a document that is only a title still needs to be findable
        chunks.append(Chunk(f"{source_id}#0", source_type, source_id, title, path_text, title))
    return chunks
