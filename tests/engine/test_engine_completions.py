"""`/v1/completions` with the real `openai` SDK, and vLLM's `/tokenize` / `/detokenize`."""

from __future__ import annotations

import httpx
import openai
import pytest

from hitrate.engine.api import GenerationRequest, SamplingParams
from hitrate.engine.runner import TransformersEngine
from hitrate.engine.server import create_app
from hitrate.engine.server_thread import ServerThread

MODEL = "tiny"
PROMPT = "The quick brown fox jumps over the lazy dog. A cache hit saves the prefill."


@pytest.fixture(scope="module")
def engine(tiny_llama_path):
    return TransformersEngine.from_pretrained(tiny_llama_path, model_name=MODEL, pool_tokens=1 << 14)


@pytest.fixture(scope="module")
def server(engine):
    with ServerThread(create_app(engine)) as running:
        yield running


@pytest.fixture
def oa(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)


def test_a_completion_is_the_engine_generation_of_the_raw_prompt(oa, engine):
    reply = oa.completions.create(model=MODEL, prompt=PROMPT, max_tokens=7, temperature=0, extra_body={
        "cache_salt": "c1"})
    ids = engine.tokenizer(PROMPT)["input_ids"]
    expected = engine.generate(GenerationRequest(prompt_ids=ids, params=SamplingParams(max_tokens=7), salt="c2"))
    assert reply.object == "text_completion" and reply.choices[0].text == expected.text
    assert reply.choices[0].finish_reason == expected.finish_reason
    assert reply.usage.prompt_tokens == len(ids) and reply.usage.completion_tokens == len(expected.token_ids)
    again = oa.completions.create(model=MODEL, prompt=ids, max_tokens=7, temperature=0, extra_body={"cache_salt": "c1"})
    assert again.choices[0].text == reply.choices[0].text  # token ids in, same output
    assert again.usage.prompt_tokens_details.cached_tokens == len(ids) - 1


def test_a_streamed_completion_adds_up_to_the_whole(oa):
    whole = oa.completions.create(model=MODEL, prompt=PROMPT, max_tokens=9, temperature=0)
    chunks = list(oa.completions.create(model=MODEL, prompt=PROMPT, max_tokens=9, temperature=0, stream=True,
                                        stream_options={"include_usage": True}))
    assert "".join(c.choices[0].text for c in chunks if c.choices) == whole.choices[0].text
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == whole.choices[0].finish_reason
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens


def test_bad_completion_requests_are_400(oa, engine):
    with pytest.raises(openai.BadRequestError, match="echo"):
        oa.completions.create(model=MODEL, prompt="x", echo=True)
    with pytest.raises(openai.BadRequestError, match="token ids"):
        oa.completions.create(model=MODEL, prompt=[engine.vocab_size + 5])
    with pytest.raises(openai.NotFoundError):
        oa.completions.create(model="other", prompt="x")


def test_tokenize_and_detokenize_in_vllm_shapes(server, engine):
    out = httpx.post(server.url + "/tokenize", json={"model": MODEL, "prompt": PROMPT, "return_token_strs": True}).json()
    ids = engine.tokenizer(PROMPT)["input_ids"]
    assert out == {"count": len(ids), "max_model_len": engine.max_context, "tokens": ids,
                   "token_strs": engine.tokenizer.convert_ids_to_tokens(ids)}
    assert httpx.post(server.url + "/detokenize", json={"model": MODEL, "tokens": ids}).json() == {"prompt": PROMPT}
    chat = httpx.post(server.url + "/tokenize", json={"messages": [{"role": "user", "content": "hi"}]}).json()
    usage = openai.OpenAI(base_url=server.url + "/v1", api_key="x").chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=1).usage
    assert chat["count"] == usage.prompt_tokens and chat["token_strs"] is None
    bad = httpx.post(server.url + "/detokenize", json={"tokens": [-1]})
    assert bad.status_code == 400 and "token ids" in bad.json()["error"]["message"]
