"""`QuantLinear`: an `nn.Linear` whose weights stay in their GGUF blocks."""

from __future__ import annotations

import torch

from .formats import QuantType
from .matrix import QuantMatrix
from .weights import QuantWeights


class QuantLinear(QuantWeights):
    """`y = x @ W.T + bias` with W `[out_features, in_features]` kept as the GGUF rows `blocks`
    (uint8 `[out_features, row_bytes]`, used in place: no copy). Accepts float32 or bfloat16
    `[..., in_features]` and answers in the input's dtype (computed in float32).

    It has no `weight` tensor on purpose: a float32 `[out, in]` would be the copy this module
    exists to avoid, and a stand-in would let code that multiplies by it get wrong numbers
    silently. Transformers' Qwen2/Llama layers only call the module. `dequantize()` gives the
    float32 weights when they are really wanted.

    `activations="int8"` has decode products (up to 8 rows) quantize the rows to 8-bit blocks
    first and multiply in integers, as llama.cpp does: faster where measured (Q6_K), at the cost
    of an error up to sum |w_i| * max|x in i's block| / 254 (`matrix.ACTIVATIONS`)."""

    def __init__(self, qtype: QuantType | int, blocks: torch.Tensor, out_features: int, in_features: int,
                 bias: torch.Tensor | None = None, activations: str = "float32") -> None:
        super().__init__(QuantMatrix(qtype, blocks, out_features, in_features, activations), blocks)
        self.in_features, self.out_features = in_features, out_features
        if bias is not None and tuple(bias.shape) != (out_features,):
            raise ValueError(f"bias must be [{out_features}], got {tuple(bias.shape)}")
        self.register_buffer("bias", None if bias is None else bias.detach().float().contiguous(), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.in_features or x.dtype not in (torch.float32, torch.bfloat16):
            raise ValueError(f"expected float32 or bfloat16 [..., {self.in_features}], got {x.dtype} {tuple(x.shape)}")
        if x.device.type != "cpu":
            raise ValueError(f"the quantized kernels run on the CPU; the input is on {x.device}")
        lead = x.shape[:-1]
        flat = x.reshape(-1, self.in_features).float().contiguous()
        y = self.matrix.product(flat, self.bias)
        return y.view(*lead, self.out_features).to(x.dtype)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, qtype={self.qtype.name}, "
                f"bias={self.bias is not None}, activations={self.matrix.activations}")
