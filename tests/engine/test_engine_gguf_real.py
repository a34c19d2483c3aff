"""The real Qwen2.5-Coder-0.5B GGUF, loaded as shipped, against llama.cpp's greedy reply on the same
rendered prompt (`tests/fixtures/model_outputs`, captured with llama.cpp's server on the same file).

Opt-in: set HITRATE_GGUF_DIR to the folder holding `qwen2.5-coder-0.5b-instruct.gguf` (the
`hitrate models install` location works); the file is never downloaded here. Both engines keep the
weights as shipped but sum in different orders (llama.cpp also rounds activations to 8 bits), so a
greedy reply may part ways once two tokens are nearly tied: the first tokens must agree.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hitrate.engine.api import GenerationRequest, SamplingParams
from hitrate.engine.runner import TransformersEngine

FIXTURE = Path(__file__).parents[1] / "fixtures" / "model_outputs" / "qwen2.5-coder-0.5b-instruct.json"
MODEL = "qwen2.5-coder-0.5b-instruct.gguf"
AGREEING_TOKENS = 12
SCENARIO = "merge-intervals/first-turn"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def model_path() -> Path:
    folder = os.environ.get("HITRATE_GGUF_DIR")
    if not folder or not (Path(folder) / MODEL).is_file():
        pytest.skip(f"set HITRATE_GGUF_DIR to a folder holding {MODEL} to run the real-model check")
    return Path(folder) / MODEL


def test_the_shipped_weights_reply_as_llama_cpp_does_on_the_same_file(model_path):
    captured = json.loads(FIXTURE.read_text())
    reply = next(r for r in captured["replies"] if r["scenario"] == SCENARIO and "'temperature': 0.0" in str(r["sampler"]))
    engine = TransformersEngine.from_pretrained(model_path, pool_tokens=8192, max_batch=1, tune=False)
    ids = engine.tokenizer(captured["prompts"][SCENARIO]["rendered_prompt"], add_special_tokens=False)["input_ids"]
    expected = engine.tokenizer(reply["raw"], add_special_tokens=False)["input_ids"][:AGREEING_TOKENS]
    result = engine.generate(GenerationRequest(prompt_ids=ids, params=SamplingParams(max_tokens=AGREEING_TOKENS)))
    assert result.token_ids[: len(expected)] == expected, engine.tokenizer.decode(result.token_ids)
