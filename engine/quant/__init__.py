"""GGUF weights kept in their quantized block formats, multiplied by kernels that dequantize
inside the product (`formats` describes the layouts, `kernels.c` holds the kernels)."""

from .embedding import QuantEmbedding
from .formats import QuantType, UnsupportedQuantType, supported_types
from .linear import QuantLinear

__all__ = ["QuantEmbedding", "QuantLinear", "QuantType", "UnsupportedQuantType", "supported_types"]
