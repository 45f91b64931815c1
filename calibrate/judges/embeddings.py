"""Text embeddings for the answer-relevancy metric: an OpenAI-compatible `/v1/embeddings` client
and an offline TF-IDF embedder, both giving L2-normalised rows that `cosine_to` compares.

    embedder = TfidfEmbedder(corpus)                 # offline, deterministic
    vectors = embedder.embed(texts)                  # (len(texts), vocabulary) float64

    client = EmbeddingClient(endpoint, "text-embedding-3-small", redactor)
    embedded = await client.embed(http, texts)       # Embedded(vectors float32, input_tokens)
    cosine_to(vectors[0], vectors[1:])               # cosine of the first row with each other row

Decisions where the spec is silent (docs/judges.md, "Embeddings"):

- A blank text (empty or whitespace) embeds to a zero row and is never sent: OpenAI refuses
  empty strings in `input`, and a zero row has cosine 0 with everything, the same as a text
  the TF-IDF vocabulary does not know. A call whose texts are all blank sends nothing and
  returns rows of width 0 (the dimension is unknown without an answer).
- The client's rows are float32: embedding models compute in float32 (OpenAI's `base64`
  format is float32), so nothing real is lost, the cache stores half the bytes, and a cached
  answer decodes to exactly the rows the live call returned. `cosine_to` computes in float64.
- The answer's rows are put in order by `data[i].index`; an answer without any `index` is
  taken in the order given (some local servers omit it); partial or repeated indices are a
  wire-format error.
- Errors are those of a chat call (the same `HTTPBackend.post`): see `calibrate.judges.errors`.
  A 200 that is not the embeddings format (no `data` list, the wrong number of vectors,
  non-numeric or non-finite values, rows of different lengths) is a `RetryableError`.

Caching: `embedding_cache_key(client, texts)` is the `ResponseCache.key` (SHA-256 of backend
kind, base URL, model and texts); `encode(vectors)` is its `response` and
`Embedded.input_tokens` its `input_tokens`; `decode(response)` gives the vectors back.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import httpx
import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer

from calibrate.judges.backends import Endpoint, HTTPBackend, Redactor, token_count
from calibrate.judges.baseline import stems
from calibrate.judges.errors import RetryableError, RunSetupError
from calibrate.reasons import Reason

CACHE_FORMAT = "embeddings/float32-le-base64"


@dataclass
class Embedded:
    """The rows an embeddings endpoint returned (one per text, L2-normalised) and their input tokens."""

    vectors: np.ndarray
    input_tokens: int | None


def _terms(text: str) -> list[str]:
    """Return the baseline's content-word stems of a text, as TF-IDF terms."""
    return sorted(stems(text))


class TfidfEmbedder:
    """Embed texts offline as TF-IDF rows over the baseline judge's word stems.

    Terms are `baseline.stems`: casefolded, accents removed, stop words out, cut to five
    letters — so "Médicos" and "medico" are one term, exactly as the baseline judge sees
    them. A stem counts once per text (the baseline's stems are a set), weighted by its smoothed
    IDF over `corpus`; fit it on the whole run's texts (questions, answers, contexts), not on
    one sample's few, or the IDF says little.
    """

    def __init__(self, corpus: Sequence[str]) -> None:
        self.vectorizer: TfidfVectorizer | None = TfidfVectorizer(analyzer=_terms)
        try:
            self.vectorizer.fit(list(corpus))
        except ValueError:  # no stems anywhere in the corpus: every text embeds to nothing
            self.vectorizer = None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return one dense L2-normalised row per text; a text with no known stem gives a zero row."""
        if self.vectorizer is None:
            return np.zeros((len(texts), 0))
        return self.vectorizer.transform(list(texts)).toarray()


class EmbeddingClient(HTTPBackend):
    """`POST {base_url}/embeddings` on an OpenAI-compatible server (OpenAI, vLLM, Ollama, llama.cpp…).

    It shares the chat backends' one POST, so every failure is classified as for a chat call.
    """

    name = "openai-embeddings"
    path = "/embeddings"

    def __init__(self, endpoint: Endpoint, model: str, redact: Redactor | None = None) -> None:
        if endpoint.backend != "openai":
            raise RunSetupError(Reason("embeddings_no_endpoint", backend=endpoint.backend))
        if not model.strip():
            raise RunSetupError(Reason("embeddings_needs_model"))
        super().__init__(replace(endpoint, model=model.strip()), {}, redact=redact)

    async def embed(self, client: httpx.AsyncClient, texts: Sequence[str]) -> Embedded:
        """Embed texts in one request; return their rows in the order given, or raise a BackendError."""
        sent = [i for i, text in enumerate(texts) if text.strip()]
        if not sent:
            return Embedded(np.zeros((len(texts), 0), dtype=np.float32), 0)
        data = await self.post(client, {"model": self.model, "input": [texts[i] for i in sent]})
        rows = self.rows(data, len(sent))
        vectors = np.zeros((len(texts), rows.shape[1]), dtype=np.float32)
        vectors[sent] = _normalised(rows)
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        return Embedded(vectors, token_count(usage.get("prompt_tokens")))

    def rows(self, data: Any, expected: int) -> np.ndarray:
        """Return the answer's vectors ordered by `index` (RetryableError if it is not the wire format)."""
        items = data.get("data") if isinstance(data, dict) else None
        if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
            raise RetryableError(f"the answer from {self.url} does not follow the embeddings format (no data list)")
        if len(items) != expected:
            raise RetryableError(f"the answer from {self.url} has {len(items)} embeddings for {expected} texts")
        indices = [item.get("index") for item in items]
        if any(index is not None for index in indices):
            if sorted(i if isinstance(i, int) and not isinstance(i, bool) else -1 for i in indices) != list(range(expected)):
                raise RetryableError(f"the answer from {self.url} has embedding indices {indices[:10]}, "
                                     f"not each of 0…{expected - 1} once")
            items = sorted(items, key=lambda item: item["index"])
        vectors = [item.get("embedding") for item in items]
        if not all(isinstance(v, list) and v and all(_number(x) for x in v) for v in vectors):
            raise RetryableError(f"the answer from {self.url} has an embedding that is not a list of numbers")
        if len({len(v) for v in vectors}) != 1:
            raise RetryableError(f"the answer from {self.url} has embeddings of different lengths "
                                 f"({sorted({len(v) for v in vectors})})")
        matrix = np.asarray(vectors, dtype=np.float64)
        if not np.isfinite(matrix).all():
            raise RetryableError(f"the answer from {self.url} has an embedding with NaN or infinite values")
        return matrix


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _normalised(rows: np.ndarray) -> np.ndarray:
    """Return rows divided by their L2 norms; zero rows stay zero."""
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return np.divide(rows, norms, out=np.zeros_like(rows, dtype=np.float64), where=norms > 0)


def cosine_to(query: np.ndarray, others: np.ndarray) -> np.ndarray:
    """Return the cosine similarity of one vector with each row of `others` (0.0 where either is zero)."""
    query = np.asarray(query, dtype=np.float64)
    others = np.asarray(others, dtype=np.float64)
    if query.ndim != 1 or others.ndim != 2 or others.shape[1] != query.shape[0]:
        raise ValueError(f"cosine_to needs a vector and rows of its length; got shapes {query.shape} and {others.shape}")
    q_norm = np.linalg.norm(query)
    if q_norm == 0:
        return np.zeros(others.shape[0])
    norms = np.linalg.norm(others, axis=1) * q_norm
    dots = others @ query
    cosines = np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)
    return np.clip(cosines, -1.0, 1.0)


# --------------------------------------------------------------------------- cache


def embedding_cache_key(client: EmbeddingClient, texts: Sequence[str]) -> str:
    """Return the `ResponseCache.key` of an embeddings call: backend kind, base URL, model and texts."""
    blob = json.dumps({"kind": "embeddings", "backend": client.endpoint.backend, "base_url": client.endpoint.base_url,
                       "model": client.model, "input": list(texts)},
                      sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def encode(vectors: np.ndarray) -> str:
    """Return rows as the text stored in `ResponseCache.response` (JSON: shape and float32 base64)."""
    rows = np.asarray(vectors, dtype="<f4")
    if rows.ndim != 2:
        raise ValueError(f"encode needs rows (2-D); got shape {rows.shape}")
    return json.dumps({"format": CACHE_FORMAT, "shape": list(rows.shape),
                       "data": base64.b64encode(rows.tobytes()).decode("ascii")})


def decode(text: str) -> np.ndarray:
    """Return the rows `encode` stored (ValueError if the text is not such an entry: treat it as a miss)."""
    try:
        entry = json.loads(text)
        if entry["format"] != CACHE_FORMAT:
            raise ValueError(f"not {CACHE_FORMAT}")
        n, d = (int(x) for x in entry["shape"])
        raw = base64.b64decode(entry["data"], validate=True)
        return np.frombuffer(raw, dtype="<f4").reshape(n, d).astype(np.float32)
    except (KeyError, TypeError, ValueError, binascii.Error) as exc:
        raise ValueError(f"not a cached embeddings entry: {exc}") from exc


__all__ = ["Embedded", "EmbeddingClient", "TfidfEmbedder", "cosine_to", "decode", "embedding_cache_key", "encode"]
