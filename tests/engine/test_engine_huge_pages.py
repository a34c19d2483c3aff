"""Weights on transparent huge pages (`engine.huge_pages`): the storages move into a mapping the
kernel is asked to back with 2 MiB pages, every parameter keeps its values, shape and strides,
parameters that shared a storage still share one, and an engine's decode step on the moved
weights generates what transformers generates."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import random
from pathlib import Path

import pytest
import torch
from torch import nn
from transformers import AutoModelForCausalLM

from hitrate.engine import huge_pages
from hitrate.engine.api import GenerationRequest, SamplingParams
from hitrate.engine.runner import TransformersEngine

needs_huge_pages = pytest.mark.skipif(not huge_pages.huge_pages_available(),
                                      reason="no transparent huge pages on this system")


def mapping_flags(pointer: int) -> list[str]:
    """The `VmFlags` of the mapping holding `pointer` (`hg`: marked `MADV_HUGEPAGE`)."""
    start = end = None
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split()[0]
            if "-" in head and all(c in "0123456789abcdef-" for c in head):
                start, end = (int(part, 16) for part in head.split("-"))
            elif head == "VmFlags:" and start is not None and start <= pointer < end:
                return line.split()[1:]
    raise AssertionError(f"no mapping holds {pointer:#x}")


@needs_huge_pages
def test_storages_move_to_a_huge_page_mapping_keeping_values_strides_and_sharing():
    torch.manual_seed(0)
    fused = nn.Parameter(torch.randn(96, 512), requires_grad=False)  # 192 KiB
    first, second = (nn.Parameter(fused.data[:32], requires_grad=False),
                     nn.Parameter(fused.data[32:], requires_grad=False))
    transposed = nn.Parameter(torch.randn(512, 64).t(), requires_grad=False)  # `[in, out]` in memory
    small = nn.Parameter(torch.randn(16), requires_grad=False)
    before = {name: p.clone() for name, p in
              dict(fused=fused, first=first, second=second, transposed=transposed, small=small).items()}
    old_pointer, small_pointer = fused.data_ptr(), small.data_ptr()

    moved = huge_pages.move_to_huge_pages([fused, first, second, transposed, small, fused])

    assert moved == 96 * 512 * 4 + 512 * 64 * 4  # each storage once, the small one left
    assert small.data_ptr() == small_pointer
    assert fused.data_ptr() != old_pointer
    for name, p in dict(fused=fused, first=first, second=second, transposed=transposed, small=small).items():
        assert torch.equal(p, before[name]), name
        assert p.stride() == before[name].stride() or name == "transposed"
    assert transposed.stride() == (1, 64) and not transposed.is_contiguous()
    # the slices still view the fused matrix: a write through one shows in the other
    assert first.untyped_storage().data_ptr() == second.untyped_storage().data_ptr() == fused.untyped_storage().data_ptr()
    assert second.data_ptr() == fused.data_ptr() + 32 * 512 * 4
    fused.data[40, 0] = 7.0
    assert second[8, 0] == 7.0
    assert fused.data_ptr() % 64 == 0 and transposed.data_ptr() % 64 == 0
    assert "hg" in mapping_flags(fused.data_ptr())


@needs_huge_pages
def test_nothing_to_move_allocates_nothing():
    assert huge_pages.move_to_huge_pages([nn.Parameter(torch.randn(8), requires_grad=False)]) == 0
    assert huge_pages.move_to_huge_pages([]) == 0


@needs_huge_pages
@pytest.mark.parametrize("arch", ["llama", "gemma3_text"])
def test_an_engine_decodes_on_huge_page_weights_what_transformers_generates(tiny_model_factory, arch):
    path = tiny_model_factory(arch, hidden=128, intermediate=512, vocab_size=1024)
    engine = TransformersEngine.from_pretrained(path, pool_tokens=4096)
    assert engine.metrics()["fast_decode"] == 1, engine.fast_decode_off_reason
    assert engine.metrics()["huge_page_weight_bytes"] >= 1024 * 128 * 4
    embedding = engine.model.get_input_embeddings().weight
    assert "hg" in mapping_flags(embedding.data_ptr())
    layer = engine.fast_decoder.layers[0]
    assert "hg" in mapping_flags(layer.qkv.weight.data_ptr()) and "hg" in mapping_flags(layer.gate_up.weight.data_ptr())
    reference = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    rng = random.Random(3)
    prompt = [rng.randrange(3, 1000) for _ in range(19)]
    with torch.no_grad():
        expected = reference.generate(torch.tensor([prompt]), max_new_tokens=12, min_new_tokens=12, do_sample=False)
    result = engine.generate(GenerationRequest(prompt_ids=prompt, params=SamplingParams(max_tokens=12, ignore_eos=True)))
    assert result.token_ids == expected[0, len(prompt):].tolist()


def test_without_huge_pages_the_weights_stay_where_they_are(monkeypatch):
    monkeypatch.setattr(huge_pages, "huge_pages_available", lambda: False)
    weight = nn.Parameter(torch.randn(256, 256), requires_grad=False)
    pointer = weight.data_ptr()
    assert huge_pages.move_to_huge_pages([weight]) == 0
    assert weight.data_ptr() == pointer


@needs_huge_pages
def test_moved_storages_are_not_moved_again_and_a_freed_mapping_is_forgotten():
    weight = nn.Parameter(torch.randn(256, 256), requires_grad=False)
    assert huge_pages.move_to_huge_pages([weight]) == 256 * 256 * 4
    pointer = weight.data_ptr()
    assert huge_pages.move_to_huge_pages([weight]) == 0 and weight.data_ptr() == pointer
    holding = [(start, end) for start, end in huge_pages._arenas if start <= pointer < end]
    assert len(holding) == 1
    del weight
    gc.collect()
    assert holding[0] not in huge_pages._arenas


@needs_huge_pages
def test_importing_the_engine_puts_torchs_own_large_blocks_on_huge_pages():
    """The packed weight copies are opaque tensors that cannot be moved: PyTorch's allocator
    marks them itself once the engine has set `THP_MEM_ALLOC_ENABLE` before the first tensor."""
    script = (
        "import hitrate.engine.runner, torch\n"
        "from tests.engine.test_engine_huge_pages import mapping_flags\n"
        "block = torch.empty(64 << 20, dtype=torch.uint8)\n"
        "print('hg' in mapping_flags(block.data_ptr()))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "THP_MEM_ALLOC_ENABLE"}
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=root, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"
