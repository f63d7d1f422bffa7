"""The encoder slot budget (vLLM's EncoderDecoderCacheManager) as a spec kind (docs/slots-contract.md)."""
