"""The engines' tests share one process: vLLM is imported before SGLang when both are installed.

SGLang 0.5.23's RadixCache import chain imports part of vLLM 0.34.0 (its distributed utilities) and
survives a failed import there, leaving vLLM's custom op `vllm::all_reduce` registered by a module
that is no longer in sys.modules; a later `import vllm.v1.core.block_pool` registers it again and
torch raises RuntimeError. In the other order both import (docs/engines.md).
"""

from __future__ import annotations

import contextlib

with contextlib.suppress(ImportError):
    import vllm.v1.core.block_pool  # noqa: F401
