"""`load_gguf`: a GGUF file's model and tokenizer, read once, timed by stage."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from hitrate.engine.gguf_load import config as gguf_config
from hitrate.engine.gguf_load.model import build_model, planned_weight_nbytes, weight_nbytes
from hitrate.engine.gguf_load.reader import GGUFFile

# The weights as the file ships them: quantized matrices stay in their blocks (`--dtype gguf`).
AS_SHIPPED = "gguf"


@dataclass
class LoadedGGUF:
    model: torch.nn.Module
    tokenizer: object
    file: GGUFFile
    weight_bytes: int  # the model's weights as they sit in memory
    seconds: dict[str, float] = field(default_factory=dict)  # per stage: read, config, tokenizer, model


def load_gguf(path: str | Path, dtype: torch.dtype | None = None,
              before_build: Callable[[int, object], None] | None = None) -> LoadedGGUF:
    """`dtype` None: as shipped (quantized blocks kept); a float dtype: every tensor dequantized.
    `before_build(weight bytes, config)` runs once the metadata is read, before any weight is in memory
    (the memory check: it raises to stop the load)."""
    seconds: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(stage: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        seconds[stage] = now - clock
        clock = now

    file = GGUFFile(path)
    lap("read")
    config = gguf_config.transformers_config(file)
    lap("config")
    tokenizer = gguf_config.tokenizer(file)
    lap("tokenizer")
    if before_build is not None:
        before_build(planned_weight_nbytes(file, dtype), config)
    model = build_model(file, config, dtype)
    lap("model")
    return LoadedGGUF(model, tokenizer, file, weight_nbytes(model), seconds)
