"""RMSNorms for the fast decode step (`engine.fast_decode`): each norm module's own formula in a
few tensor ops, and a layer's query and key norms as one, used only where they reproduce the
modules bit for bit on a probe."""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

Norm = Callable[[torch.Tensor], torch.Tensor]


def fused_qk_norm(attn: nn.Module, q_norm: Norm, k_norm: Norm, heads: int, kv_heads: int) -> Norm | None:
    """The query and key norms as one norm over `[n, heads + kv_heads, head_dim]` and one
    multiply by their weights stacked per head, when that reproduces `q_norm` on the query heads
    and `k_norm` on the key heads bit for bit on a probe (float32 only); else None."""
    params = [_norm_params(attn.q_norm), _norm_params(attn.k_norm)]
    if any(p is None or p[0].dtype != torch.float32 for p in params) or params[0][1] != params[1][1]:
        return None
    (q_weight, eps), (k_weight, _) = params
    dim = q_weight.shape[0]
    eps_t, size_t = _norm_constants(eps, dim)
    with torch.no_grad():
        probe = torch.randn(3, heads + kv_heads, dim, generator=torch.Generator().manual_seed(1)).to(q_weight.device) * 3
        expected = torch.cat((q_norm(probe[:, :heads]), k_norm(probe[:, heads:])), dim=1)
        for q_w, k_w in zip(_formula_weights(q_weight), _formula_weights(k_weight)):
            stacked = torch.cat([q_w] * heads + [k_w] * kv_heads).view(heads + kv_heads, dim)

            def fused(x: torch.Tensor, stacked: torch.Tensor = stacked) -> torch.Tensor:
                return _rms(x, eps_t, size_t).mul_(stacked)

            if torch.equal(fused(probe), expected):
                return fused
    return None


def _norm_params(module: nn.Module) -> tuple[torch.Tensor, float] | None:
    """(weight, eps) of an RMSNorm-like module (a 1-D weight and a float epsilon), else None."""
    weight = getattr(module, "weight", None)
    eps = getattr(module, "eps", getattr(module, "variance_epsilon", None))
    if not isinstance(weight, torch.Tensor) or weight.dim() != 1 or not isinstance(eps, float):
        return None
    return weight, eps


def _formula_weights(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """What each formula multiplies by: Gemma's `1 + weight` in float32, Llama's `weight`."""
    return (1.0 + weight.detach().float()), weight.detach()


def _rms(x: torch.Tensor, eps: torch.Tensor, size: torch.Tensor) -> torch.Tensor:
    """`x / sqrt(mean(x^2) + eps)` over the last dim in float32, as the Gemma and Llama norm modules
    write it, in five ops, where `F.rms_norm` on the CPU runs ~20 (its dtype handling) for the
    same result; a decode step runs ~90 norms, each just after a matmul streamed the caches away.
    `x * x` is what `pow(x, 2)` computes and `sum / size` what `mean` does on the CPU; `eps` and
    `size` (the last dim's length) are 0-dim float32 tensors, which spares each op the conversion
    of a Python number to a tensor (an allocation and a copy, the same value)."""
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True).div_(size).add_(eps))


def _norm_constants(eps: float, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.tensor(eps, dtype=torch.float32), torch.tensor(float(size), dtype=torch.float32)


def norm(module: nn.Module) -> Norm:
    """The module's own formula (`_rms`; `F.rms_norm` outside float32) when that reproduces the
    module exactly on a probe, else the module itself."""
    params = _norm_params(module)
    if params is None:
        return module
    weight, eps = params
    shape = (weight.shape[0],)
    dtype = weight.dtype
    eps_t, size_t = _norm_constants(eps, shape[0])
    with torch.no_grad():
        gemma_weight, plain_weight = _formula_weights(weight)

        def gemma(x: torch.Tensor) -> torch.Tensor:  # float32 math, `1 + weight`, then cast
            if x.dtype == torch.float32:
                return _rms(x, eps_t, size_t).mul_(gemma_weight)
            return F.rms_norm(x.float(), shape, gemma_weight, eps).to(x.dtype)

        def llama(x: torch.Tensor) -> torch.Tensor:  # float32 math, cast, then `weight *`
            if x.dtype == torch.float32 and dtype == torch.float32:
                return _rms(x, eps_t, size_t).mul_(plain_weight)
            return plain_weight * F.rms_norm(x.float(), shape, None, eps).to(x.dtype)

        probe = torch.randn(3, shape[0], generator=torch.Generator().manual_seed(0)).to(weight.device, dtype) * 3
        expected = module(probe)
        for candidate in (gemma, llama):
            if torch.equal(candidate(probe), expected):
                return candidate
    return module
