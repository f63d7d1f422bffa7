"""Benchmarks of a built-in implementation against an engine's own class on one workload: the
block pool against vLLM's BlockPool, the radix cache against SGLang's RadixCache (each engine in
the engines venv; without it the built-in is measured alone)."""


def print_rates(built_in: str, engine: str, ratio_name: str, figures: dict, engine_missing: str) -> None:
    """One row of the built-in's and the engine's rates (`figures[built_in]`, `figures[engine]`, the
    latter None when the engine did not run, then `engine_missing` is said) and their ratio."""
    widths = [len(name) + 2 for name in (built_in, engine, ratio_name)]
    print("".join(f"{name:>{width}}" for name, width in zip((built_in, engine, ratio_name), widths)))
    if figures[engine] is None:
        print(f"{figures[built_in]:{widths[0]},.0f}{'-':>{widths[1]}}{'-':>{widths[2]}}")
        print(f"{engine_missing}: the built-in alone (build a venv with tools/engines_venv.sh)")
        return
    ratio = figures[built_in] / figures[engine]
    print(f"{figures[built_in]:{widths[0]},.0f}{figures[engine]:{widths[1]},.0f}{ratio:{widths[2] - 1}.2f}x")
