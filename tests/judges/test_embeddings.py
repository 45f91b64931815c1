"""Embeddings for answer relevancy: the /v1/embeddings client over httpx.MockTransport and the
real fake server, the offline TF-IDF embedder, cosine_to against scikit-learn, and the cache."""

from __future__ import annotations

import json
import math

import httpx
import numpy as np
import pytest
from fakellm import FakeLLM, embedding_of
from sklearn.metrics.pairwise import cosine_similarity
from sqlmodel import select

from calibrate.db import write_session
from calibrate.judges.backends import Endpoint, Redactor, build_client
from calibrate.judges.baseline import stems
from calibrate.judges.embeddings import (
    Embedded,
    EmbeddingClient,
    TfidfEmbedder,
    cosine_to,
    decode,
    embedding_cache_key,
    encode,
)
from calibrate.judges.errors import (
    FatalBackendError,
    MalformedResponse,
    RateLimited,
    RequestRejected,
    RetryableError,
    RunSetupError,
    Unreachable,
)
from calibrate.judges.execution import run_coroutine
from calibrate.models import ResponseCache

OPENAI = Endpoint("openai", "http://llm.test/v1", "chat-model", "KEY")
SECRET = "sk-secret-123"


def embed(handler, texts, *, endpoint=OPENAI, model="emb-1", key=SECRET, **client_options) -> Embedded:
    """Embed texts with a client whose transport is `handler` (an httpx.MockTransport) or a real URL."""
    embedder = EmbeddingClient(endpoint, model, Redactor(key))
    transport = httpx.MockTransport(handler) if handler is not None else None

    async def go():
        async with build_client(endpoint, api_key=key, transport=transport, **client_options) as client:
            return await embedder.embed(client, texts)

    return run_coroutine(go())


def answer(vectors, *, order=None, tokens=9, **extra):
    order = range(len(vectors)) if order is None else order
    data = [{"object": "embedding", "index": i, "embedding": vectors[i]} for i in order]
    return httpx.Response(200, json={"object": "list", "data": data, "usage": {"prompt_tokens": tokens}, **extra})


# --------------------------------------------------------------------------- the client, MockTransport


def test_the_request_is_one_post_of_model_and_input_with_the_key_in_the_header():
    seen = {}

    def handler(request):
        seen["url"], seen["body"], seen["auth"] = str(request.url), json.loads(request.content), request.headers["authorization"]
        return answer([[1.0, 0.0], [0.0, 2.0]])

    embed(handler, ["first text", "second text"])
    assert seen == {"url": "http://llm.test/v1/embeddings", "body": {"model": "emb-1", "input": ["first text", "second text"]},
                    "auth": f"Bearer {SECRET}"}


def test_rows_follow_the_index_are_l2_normalised_float32_and_usage_is_read():
    result = embed(lambda request: answer([[3.0, 4.0], [0.0, -2.0], [1.0, 1.0]], order=[2, 0, 1], tokens=17),
                   ["a", "b", "c"])
    expected = np.array([[0.6, 0.8], [0.0, -1.0], [math.sqrt(0.5), math.sqrt(0.5)]])
    assert result.vectors.dtype == np.float32 and result.vectors.shape == (3, 2)
    np.testing.assert_allclose(result.vectors, expected, rtol=1e-6)
    assert result.input_tokens == 17


def test_an_answer_without_indices_is_taken_in_order_and_missing_usage_is_none():
    def handler(request):
        return httpx.Response(200, json={"data": [{"embedding": [1, 0]}, {"embedding": [0, 5]}]})

    result = embed(handler, ["a", "b"])
    np.testing.assert_array_equal(result.vectors, [[1, 0], [0, 1]])
    assert result.input_tokens is None


def test_blank_texts_are_not_sent_and_embed_to_zero_rows():
    bodies = []

    def handler(request):
        bodies.append(json.loads(request.content))
        return answer([[2.0, 0.0], [0.0, 3.0]])

    result = embed(handler, ["", "one", "  ", "two"])
    assert bodies == [{"model": "emb-1", "input": ["one", "two"]}]
    np.testing.assert_array_equal(result.vectors, [[0, 0], [1, 0], [0, 0], [0, 1]])
    np.testing.assert_array_equal(cosine_to(result.vectors[1], result.vectors), [0.0, 1.0, 0.0, 0.0])


def test_all_blank_texts_make_no_call():
    def handler(request):
        raise AssertionError("no request expected")

    result = embed(handler, ["", " \n"])
    assert result.vectors.shape == (2, 0) and result.input_tokens == 0
    np.testing.assert_array_equal(cosine_to(result.vectors[0], result.vectors[1:]), [0.0])


@pytest.mark.parametrize(
    ("response", "error", "fragment"),
    [
        (httpx.Response(401, json={"error": {"message": f"Incorrect API key provided: {SECRET}"}}), FatalBackendError, "HTTP 401"),
        (httpx.Response(403, json={"error": {"message": f"key {SECRET} forbidden"}}), FatalBackendError, "HTTP 403"),
        (httpx.Response(404, json={"error": {"message": "The model `emb-1` does not exist"}}), FatalBackendError,
         r"model 'emb-1' or URL http://llm.test/v1/embeddings not found"),
        (httpx.Response(400, json={"error": {"message": f"bad input for {SECRET}"}}), RequestRejected, "HTTP 400"),
        (httpx.Response(422, json={"error": {"message": "bad"}}), RequestRejected, "HTTP 422"),
        (httpx.Response(429, headers={"retry-after": "7"}, json={}), RateLimited, "HTTP 429"),
        (httpx.Response(500, json={}), RetryableError, "HTTP 500"),
        (httpx.Response(503, text=f"busy {SECRET}"), RetryableError, "HTTP 503"),
        (httpx.Response(200, text='{"data": ['), MalformedResponse, "not JSON"),
        (httpx.ConnectError("connection refused"), Unreachable, "cannot reach http://llm.test/v1/embeddings"),
        (httpx.ReadTimeout("slow"), RetryableError, "no answer"),
        (httpx.RemoteProtocolError("Server disconnected without sending a response."), RetryableError, "dropped"),
    ],
)
def test_failures_are_classified_like_chat_calls_and_the_key_is_redacted(response, error, fragment):
    def handler(request):
        if isinstance(response, Exception):
            raise response
        return response

    with pytest.raises(error, match=fragment) as caught:
        embed(handler, ["a"])
    assert SECRET not in str(caught.value)
    assert type(caught.value) is error
    if isinstance(caught.value, RateLimited):
        assert caught.value.retry_after == 7


def test_retry_after_ms_is_read_on_a_429():
    with pytest.raises(RateLimited) as caught:
        embed(lambda request: httpx.Response(429, headers={"retry-after-ms": "250"}, json={}), ["a"])
    assert caught.value.retry_after == 0.25


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"result": [[1, 2]]}, "no data list"),
        ({"data": {"0": [1, 2]}}, "no data list"),
        ({"data": [[1, 2], [3, 4]]}, "no data list"),
        ({"data": [{"index": 0, "embedding": [1, 2]}]}, "1 embeddings for 2 texts"),
        ({"data": [{"index": 0, "embedding": [1, 2]}, {"index": 0, "embedding": [3, 4]}]}, "not each of 0…1 once"),
        ({"data": [{"index": 0, "embedding": [1, 2]}, {"index": 2, "embedding": [3, 4]}]}, "not each of 0…1 once"),
        ({"data": [{"index": 0, "embedding": [1, 2]}, {"embedding": [3, 4]}]}, "not each of 0…1 once"),
        ({"data": [{"index": 0, "embedding": "AACAPwAAAEA="}, {"index": 1, "embedding": [3, 4]}]}, "not a list of numbers"),
        ({"data": [{"index": 0, "embedding": [1, "2"]}, {"index": 1, "embedding": [3, 4]}]}, "not a list of numbers"),
        ({"data": [{"index": 0, "embedding": [True, 2]}, {"index": 1, "embedding": [3, 4]}]}, "not a list of numbers"),
        ({"data": [{"index": 0, "embedding": []}, {"index": 1, "embedding": []}]}, "not a list of numbers"),
        ({"data": [{"index": 0}, {"index": 1, "embedding": [3, 4]}]}, "not a list of numbers"),
        ({"data": [{"index": 0, "embedding": [1, 2, 3]}, {"index": 1, "embedding": [3, 4]}]}, r"different lengths \(\[2, 3\]\)"),
        (b'{"data": [{"index": 0, "embedding": [NaN, 2]}, {"index": 1, "embedding": [3, 4]}]}', "NaN or infinite"),
        (b'{"data": [{"index": 0, "embedding": [1e999, 2]}, {"index": 1, "embedding": [3, 4]}]}', "NaN or infinite"),
        ([1, 2], "no data list"),
    ],
)
def test_a_200_that_is_not_the_embeddings_format_is_retryable(body, fragment):
    with pytest.raises(RetryableError, match=fragment) as caught:
        embed(lambda request: httpx.Response(200, **{"content" if isinstance(body, bytes) else "json": body}), ["a", "b"])
    assert type(caught.value) is RetryableError and "http://llm.test/v1/embeddings" in str(caught.value)


@pytest.mark.parametrize("backend", ["anthropic", "baseline"])
def test_backends_without_embeddings_are_refused_with_the_way_out(backend):
    with pytest.raises(RunSetupError, match="embedder=tfidf.*OpenAI-compatible embeddings server"):
        EmbeddingClient(Endpoint(backend, "http://llm.test", "claude-x", "KEY"), "emb-1")


def test_an_embeddings_client_needs_a_model():
    with pytest.raises(RunSetupError, match="embedding_model"):
        EmbeddingClient(OPENAI, " ")


# --------------------------------------------------------------------------- the client against the real fake server


@pytest.fixture
def fake_embeddings():
    server = FakeLLM(api_key=SECRET, models=["emb-1"], retry_after="3").start()
    yield server
    server.stop()


def served(server, texts, **options):
    return embed(None, texts, endpoint=Endpoint("openai", server.openai_base, "chat-model", "KEY"), **options)


def test_the_fake_server_embeds_deterministically_and_shared_words_are_closer(fake_embeddings):
    texts = ["How much folic acid in pregnancy?", "How much folic acid should I take?", "Train timetable to Madrid"]
    first = served(fake_embeddings, texts)
    again = served(fake_embeddings, texts)
    np.testing.assert_array_equal(first.vectors, again.vectors)
    raw = np.array([embedding_of(text) for text in texts])
    np.testing.assert_allclose(first.vectors, raw / np.linalg.norm(raw, axis=1, keepdims=True), rtol=1e-6)
    similar, unrelated = cosine_to(first.vectors[0], first.vectors[1:])
    assert similar > 0.5 > unrelated
    assert first.input_tokens == 6 + 7 + 4
    stats = fake_embeddings.stats()
    assert stats["counts"]["embeddings"] == 2 and stats["requests"] == 2 and "openai" not in stats["counts"]
    assert fake_embeddings.requests[0]["path"] == "/v1/embeddings"


def test_the_fake_server_429_carries_retry_after(fake_embeddings):
    fake_embeddings.script = ["429", "ok"]
    with pytest.raises(RateLimited) as caught:
        served(fake_embeddings, ["a question"])
    assert caught.value.retry_after == 3.0 and caught.value.status == 429
    assert served(fake_embeddings, ["a question"]).vectors.shape == (1, 64)
    assert fake_embeddings.stats()["counts"]["429"] == 1


@pytest.mark.parametrize(
    ("fault", "error", "fragment"),
    [
        ("500", RetryableError, "HTTP 500"),
        ("drop", RetryableError, "dropped"),
        ("timeout", RetryableError, "no answer"),
        ("invalid_json", MalformedResponse, "not JSON"),
        ("wrong_schema", RetryableError, "no data list"),
        ("garbage", RetryableError, "1 embeddings for 2 texts"),
    ],
)
def test_the_fake_server_faults_are_classified(fake_embeddings, fault, error, fragment):
    fake_embeddings.script = [fault]
    fake_embeddings.hang = 1.0
    with pytest.raises(error, match=fragment) as caught:
        served(fake_embeddings, ["one text", "two texts"], read_timeout=0.3)
    assert type(caught.value) is error


def test_the_fake_server_refuses_a_wrong_key_and_an_unknown_model(fake_embeddings):
    with pytest.raises(FatalBackendError, match="HTTP 401") as caught:
        served(fake_embeddings, ["a"], key="sk-wrong-456")
    assert "sk-wrong-456" not in str(caught.value)  # the server echoes it; the client redacts it
    with pytest.raises(FatalBackendError, match="model 'emb-2'.*HTTP 404"):
        served(fake_embeddings, ["a"], model="emb-2")


# --------------------------------------------------------------------------- the offline TF-IDF embedder


def test_tfidf_identical_texts_have_cosine_one_and_disjoint_texts_zero():
    texts = ["Folic acid before pregnancy", "Folic acid before pregnancy", "Railway timetables Madrid"]
    vectors = TfidfEmbedder(texts).embed(texts)
    np.testing.assert_allclose(cosine_to(vectors[0], vectors), [1.0, 1.0, 0.0])
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0)


def test_tfidf_weights_are_idf_over_the_baseline_stems():
    # stems: apple, banan | apple, cherr; smoothed idf = ln((1 + n) / (1 + df)) + 1
    embedder = TfidfEmbedder(["apple banana", "apple cherry"])
    row = embedder.embed(["apple banana"])[0]
    terms = embedder.vectorizer.get_feature_names_out().tolist()
    assert terms == ["apple", "banan", "cherr"]
    weights = np.array([1.0, math.log(3 / 2) + 1, 0.0])
    np.testing.assert_allclose(row, weights / np.linalg.norm(weights))


def test_tfidf_folds_case_accents_and_plurals_like_the_baseline():
    texts = ["¿Cuántos MÉDICOS recomiendan ácido fólico?", "cuantos medicos recomiendan acido folico",
             "Medicamentos genéricos", "medicamento generico"]
    assert stems(texts[0]) == stems(texts[1]) and stems(texts[2]) == stems(texts[3])
    vectors = TfidfEmbedder(texts).embed(texts)
    assert cosine_to(vectors[0], vectors[1:2])[0] == pytest.approx(1.0)
    assert cosine_to(vectors[2], vectors[3:4])[0] == pytest.approx(1.0)


def test_tfidf_empty_stop_word_and_unknown_texts_are_zero_rows_with_cosine_zero():
    embedder = TfidfEmbedder(["folic acid dose", "iron supplements"])
    vectors = embedder.embed(["", "the of and", "zebra xylophone", "folic acid dose"])
    np.testing.assert_array_equal(vectors[:3], 0.0)
    cosines = cosine_to(vectors[3], vectors)
    np.testing.assert_array_equal(cosines, [0.0, 0.0, 0.0, 1.0])
    np.testing.assert_array_equal(cosine_to(vectors[0], vectors), 0.0)


def test_tfidf_on_a_corpus_without_words_gives_empty_rows():
    embedder = TfidfEmbedder(["", "the and of", "42"])
    vectors = embedder.embed(["anything at all", ""])
    assert vectors.shape == (2, 0)
    np.testing.assert_array_equal(cosine_to(vectors[0], vectors), [0.0, 0.0])


def test_tfidf_is_deterministic():
    corpus = [f"question {i} about dosage {'iron' if i % 2 else 'folic'} supplements" for i in range(30)]
    np.testing.assert_array_equal(TfidfEmbedder(corpus).embed(corpus), TfidfEmbedder(list(corpus)).embed(corpus))


# --------------------------------------------------------------------------- cosine_to


def test_cosine_to_matches_scikit_learn_including_zero_rows():
    rng = np.random.default_rng(7)
    others = rng.normal(size=(20, 16))
    others[[3, 11]] = 0.0
    query = rng.normal(size=16)
    expected = cosine_similarity(query[None, :], others)[0]
    np.testing.assert_allclose(cosine_to(query, others), expected, atol=1e-12)
    np.testing.assert_allclose(cosine_to(-query, others), -expected, atol=1e-12)
    np.testing.assert_array_equal(cosine_to(np.zeros(16), others), 0.0)
    assert cosine_to(others[0] * 1e6, others[:1])[0] == pytest.approx(1.0)


@pytest.mark.parametrize(("query", "others"), [(np.ones(3), np.ones((2, 4))), (np.ones((1, 3)), np.ones((2, 3))),
                                               (np.ones(3), np.ones(3))])
def test_cosine_to_refuses_mismatched_shapes(query, others):
    with pytest.raises(ValueError, match="cosine_to needs"):
        cosine_to(query, others)


# --------------------------------------------------------------------------- cache


def test_cache_entries_round_trip_through_the_response_cache_table(engine, fake_embeddings):
    texts = ["How much folic acid?", "", "Which dose of folic acid?"]
    embedded = served(fake_embeddings, texts)
    client = EmbeddingClient(Endpoint("openai", fake_embeddings.openai_base, "chat", "KEY"), "emb-1")
    key = embedding_cache_key(client, texts)
    with write_session(engine) as session:
        session.add(ResponseCache(key=key, backend=client.name, model=client.model, response=encode(embedded.vectors),
                                  input_tokens=embedded.input_tokens))
    with write_session(engine) as session:
        row = session.exec(select(ResponseCache).where(ResponseCache.key == key)).one()
        vectors = decode(row.response)
        assert (row.backend, row.model, row.input_tokens) == ("openai-embeddings", "emb-1", embedded.input_tokens)
    assert vectors.dtype == np.float32
    np.testing.assert_array_equal(vectors, embedded.vectors)


def test_encode_decode_round_trip_is_exact_for_float32_and_odd_shapes():
    rng = np.random.default_rng(3)
    for shape in [(3, 1536), (1, 1), (0, 0), (4, 0)]:
        vectors = rng.normal(size=shape).astype(np.float32)
        back = decode(encode(vectors))
        assert back.shape == shape and back.dtype == np.float32
        np.testing.assert_array_equal(back, vectors)


@pytest.mark.parametrize("text", ["not json", "[]", '{"format": "other", "shape": [1, 1], "data": ""}',
                                  '{"format": "embeddings/float32-le-base64", "shape": [2, 2], "data": "AACAPw=="}',
                                  '{"format": "embeddings/float32-le-base64", "shape": [1, 1], "data": "***"}',
                                  '{"choices": []}'])
def test_decode_refuses_what_encode_did_not_write(text):
    with pytest.raises(ValueError, match="not a cached embeddings entry"):
        decode(text)


def test_the_cache_key_depends_on_base_url_model_and_texts_only():
    client = EmbeddingClient(OPENAI, "emb-1")
    key = embedding_cache_key(client, ["a", "b"])
    assert len(key) == 64 and int(key, 16) >= 0
    assert key == embedding_cache_key(EmbeddingClient(OPENAI, "emb-1", Redactor("other")), ("a", "b"))
    assert key == embedding_cache_key(EmbeddingClient(Endpoint("openai", "http://llm.test/v1", "other-chat", None), "emb-1"),
                                      ["a", "b"])
    others = {embedding_cache_key(client, ["b", "a"]), embedding_cache_key(client, ["a b"]),
              embedding_cache_key(EmbeddingClient(OPENAI, "emb-2"), ["a", "b"]),
              embedding_cache_key(EmbeddingClient(Endpoint("openai", "http://other.test/v1", "m", "KEY"), "emb-1"), ["a", "b"])}
    assert key not in others and len(others) == 4
