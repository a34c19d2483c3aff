"""The sampling settings a request gets when it names none: the model's own, as vLLM does
(`--generation-config auto`), instead of the OpenAI defaults (temperature 1, no top-k).

Where they come from, first found wins:
1. the model's generation config (`generation_config.json` beside the weights, which transformers
   loads into `model.generation_config`): the values it sets;
2. for a model without one (a GGUF carries no sampling settings: its metadata has none of
   `general.sampling.*` in the Qwen2.5-Coder files we serve), the published generation config of
   its family, recognised by name (`FAMILY_DEFAULTS`);
3. the OpenAI defaults: temperature 1, top_p 1, no top-k, no min-p.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class SamplingDefaults:
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0: no top-k cut
    min_p: float = 0.0
    source: str = "OpenAI defaults"


# Published generation configs of instruction-tuned families, for models loaded without one.
# The name pattern is matched against the served model's name and its path (case-insensitive).
FAMILY_DEFAULTS: tuple[tuple[str, SamplingDefaults], ...] = (
    # Qwen/Qwen2.5-*-Instruct and Qwen2.5-Coder-*-Instruct generation_config.json (also
    # repetition_penalty 1.05, which this engine does not apply).
    (r"qwen2(\.5)?[-_.].*instruct",
     SamplingDefaults(temperature=0.7, top_p=0.8, top_k=20, source="Qwen2.5 Instruct generation_config.json")),
    # meta-llama/Llama-3.1-8B-Instruct and Llama-3.2-*-Instruct generation_config.json.
    (r"llama[-_.]?3.*instruct",
     SamplingDefaults(temperature=0.6, top_p=0.9, source="Llama 3 Instruct generation_config.json")),
    # google/gemma-3-*-it generation_config.json.
    (r"gemma[-_.]?3.*[-_.]it\b",
     SamplingDefaults(top_p=0.95, top_k=64, source="Gemma 3 generation_config.json")),
)


def from_generation_config(config: Any) -> SamplingDefaults | None:
    """The settings a transformers `GenerationConfig` sets, or None when it sets none (recent
    transformers leave unset fields at None; `do_sample: false` means greedy)."""
    if config is None:
        return None
    values = {name: getattr(config, name, None) for name in ("temperature", "top_p", "top_k", "min_p")}
    do_sample = getattr(config, "do_sample", None)
    if all(v is None for v in values.values()) and do_sample is not False:
        return None
    defaults = SamplingDefaults(source="the model's generation_config")
    if do_sample is False:
        return replace(defaults, temperature=0.0)
    return replace(defaults, **{k: type(getattr(defaults, k))(v) for k, v in values.items() if v is not None})


def for_family(*names: str | None) -> SamplingDefaults | None:
    for pattern, defaults in FAMILY_DEFAULTS:
        if any(name and re.search(pattern, name, re.IGNORECASE) for name in names):
            return defaults
    return None


def for_engine(engine: Any) -> SamplingDefaults:
    """The defaults for the model an engine serves (see the module's docstring)."""
    model = getattr(engine, "model", None)
    found = from_generation_config(getattr(model, "generation_config", None))
    if found is not None:
        return found
    config = getattr(model, "config", None)
    path = getattr(config, "_name_or_path", None) or getattr(config, "name_or_path", None)
    return for_family(getattr(engine, "model_name", None), path) or SamplingDefaults()
