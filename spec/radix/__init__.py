"""The radix prefix cache (SGLang's RadixAttention) as a spec kind (docs/radix-contract.md)."""
