"""cacheproof.impl: the real implementations that the spec and the checker hold to account."""

from cacheproof.impl.tensor_lru_cache import TensorLRUCache

__all__ = ["TensorLRUCache"]
