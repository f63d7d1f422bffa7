"""Mutation tests of the prover: does every one-token edit of spec/ that breaks an invariant make
`cacheproof prove` fail? For the project's developers (not part of the installed package):

    python tools/prove_mutations.py [--files spec/cache/model.py spec/cache/rules.py ...] [--slots 4]
                                    [--walks 300] [--calls 40] [--jobs 2] [--json report.json]

Each edit swaps one token of the code (not of strings or comments): a comparison (< and <=, > and
>=, == and !=, `is` and `is not`), + and - (binary only), `and` and `or`, `not` dropped, 0 and 1,
True and False. For each edit, in a copy of the package whose spec/ holds the edit:
1. **breaks**: random walks of the concrete spec (`--walks` walks of up to `--calls` calls each,
   capacities 1..8, keys a-d, sizes and flags mostly valid) judged after every call by
   spec/cache/invariants.py: does some walk break I1, I2, I3 or I4? (I5, I6 and crashes are reported
   beside it.)
2. **caught**: `python -m cacheproof prove --slots N --quiet` in the copy exits 1 with its verdict
   printed (a failed obligation or a spec/model disagreement).
The report gives tried / broke an invariant / caught, per file, and lists every edit that broke
an invariant without being caught (the goal: none). Exit 0 when there is none, 1 otherwise.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tokenize
import types
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FILES = (
    "spec/cache/model.py", "spec/cache/rules.py", "spec/cache/steps.py", "spec/cache/arguments.py", "spec/arguments.py",
)
SWAPS = {
    "<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "==", "+": "-", "-": "+",
    "and": "or", "or": "and", "True": "False", "False": "True", "0": "1", "1": "0",
}
"""One-token replacements; `is` / `is not` and dropping `not` are handled beside them."""

_BINARY_AFTER = {tokenize.NAME, tokenize.NUMBER, tokenize.STRING}
_KEYWORDS_BEFORE_UNARY = {"return", "if", "elif", "and", "or", "not", "in", "is", "else", "yield", "lambda", "while"}
_INVARIANTS_BROKEN = ("I1", "I2", "I3", "I4")


@dataclass(frozen=True)
class Mutation:
    """One edit: in `path` (relative to the repository), line `line` (1-based), the text from
    column `start` to `end` becomes `new`."""

    path: str
    line: int
    start: int
    end: int
    old: str
    new: str
    code: str  # the line as written, stripped

    def apply(self, source: str) -> str:
        lines = source.splitlines(keepends=True)
        text = lines[self.line - 1]
        assert text[self.start : self.end] == self.old, (self, text)
        lines[self.line - 1] = text[: self.start] + self.new + text[self.end :]
        return "".join(lines)

    def describe(self) -> str:
        return f"{self.path}:{self.line}: {self.old!r} -> {self.new!r} in `{self.code}`"


def mutations_of(path: str, source: str) -> list[Mutation]:
    """Every one-token edit of `source` (the file at `path`), in file order."""
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(source).readline)]
    skipped = (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)
    significant = [t for t in tokens if t.type not in skipped]
    lines = source.splitlines()
    found: list[Mutation] = []
    for i, token in enumerate(significant):
        (row, col), (end_row, end_col) = token.start, token.end
        if row != end_row or token.type == tokenize.STRING or _is_import(lines[row - 1]):
            continue
        previous = significant[i - 1] if i > 0 else None
        following = significant[i + 1] if i + 1 < len(significant) else None
        code = lines[row - 1].strip()

        def edit(new: str, end: int = end_col) -> None:
            found.append(Mutation(path, row, col, end, lines[row - 1][col:end], new, code))

        if token.string == "is":
            if following is not None and following.string == "not" and following.start[0] == row:
                edit("is", following.end[1])
            else:
                edit("is not")
        elif token.string == "not":
            if previous is not None and previous.string == "is":
                continue
            if following is not None and following.string == "in":
                continue
            rest = lines[row - 1][end_col:]
            edit("", end_col + len(rest) - len(rest.lstrip()))
        elif token.string in ("+", "-"):
            if previous is not None and _ends_operand(previous):
                edit(SWAPS[token.string])
        elif token.string in SWAPS and (token.type in (tokenize.OP, tokenize.NAME, tokenize.NUMBER)):
            if token.type == tokenize.NUMBER and token.string not in ("0", "1"):
                continue
            edit(SWAPS[token.string])
    return found


def _is_import(line: str) -> bool:
    stripped = line.strip()
    return stripped.startswith(("import ", "from "))


def _ends_operand(token: tokenize.TokenInfo) -> bool:
    if token.type == tokenize.NAME:
        return token.string not in _KEYWORDS_BEFORE_UNARY
    return token.type in _BINARY_AFTER or token.string in (")", "]", "}")


# Applying an edit in-process (model_tests use these) --------------------------------------------


def load_module(name: str, source: str, filename: str) -> types.ModuleType:
    """A module named `name` made from `source` (registered while it runs: dataclasses look
    their module up), not left in sys.modules."""
    module = types.ModuleType(name)
    module.__file__ = filename
    sys.modules[name] = module
    try:
        exec(compile(source, filename, "exec"), module.__dict__)
    finally:
        del sys.modules[name]
    return module


def patch_module(target: types.ModuleType, mutant: types.ModuleType) -> dict[str, Any]:
    """Give `target` the mutant's functions and constants (callers look them up at call time);
    returns the replaced attributes, for `restore`."""
    replaced = {}
    for name, value in vars(mutant).items():
        if name.startswith("__") or isinstance(value, types.ModuleType) or not hasattr(target, name):
            continue
        if callable(value) and getattr(value, "__module__", None) != mutant.__name__:
            continue  # imported from elsewhere
        replaced[name] = getattr(target, name)
        setattr(target, name, value)
    return replaced


def restore(target: types.ModuleType, replaced: dict[str, Any]) -> None:
    for name, value in replaced.items():
        setattr(target, name, value)


# The random walk (run inside the copy) ------------------------------------------------------------

WALK_KEYS = ("a", "b", "c", "d")
WALK_CAPACITIES = (1, 2, 3, 4, 6, 8)


def random_walks(walks: int, calls: int, seed: int = 0) -> dict[str, Any]:
    """Random walks of `cacheproof.spec.CacheSpec` as imported now; which invariants break, and
    the first call that broke each (or crashed)."""
    from cacheproof.spec import CacheError, CacheSpec
    from cacheproof.spec.cache.invariants import Step, broken_invariants

    rng = random.Random(seed)
    broken: dict[str, str] = {}
    crashed = None
    for walk in range(walks):
        capacity = rng.choice(WALK_CAPACITIES)
        try:
            cache = CacheSpec(capacity)
        except Exception as error:  # a wrong spec may refuse to exist
            crashed = crashed or f"CacheSpec({capacity}): {type(error).__name__}: {error}"
            break
        for _ in range(rng.randrange(1, calls + 1)):
            operation, args, kwargs = _random_call(rng, cache)
            before = cache.snapshot()
            try:
                getattr(cache, operation)(*args, **kwargs)
                raised = False
            except CacheError:
                raised = True
            except Exception as error:
                crashed = crashed or f"walk {walk}: {operation}{args}: {type(error).__name__}: {error}"
                break
            after = cache.snapshot()
            for invariant in broken_invariants(Step(operation, capacity, before, after, raised)):
                broken.setdefault(invariant.name, f"walk {walk}, capacity {capacity}: {before} -> {operation}{args} {kwargs} -> {after}")
    return {"broken": broken, "crashed": crashed}


def _random_call(rng: random.Random, cache: Any) -> tuple[str, tuple, dict]:
    capacity = cache.capacity_bytes
    operation = rng.choice(("reserve", "acquire", "commit", "put", "get", "release", "evict", "pop", "clear"))
    key = rng.choice(WALK_KEYS)
    nbytes = rng.randrange(1, capacity + 1) if rng.random() < 0.85 else rng.choice((-1, 0, capacity + 1))
    if operation in ("reserve", "acquire"):
        return operation, (key, nbytes), {"retain": rng.random() < 0.7}
    if operation in ("commit", "put"):
        entry = next((e for e in cache.snapshot() if e.key == key), None)
        size = entry.nbytes if entry is not None and rng.random() < 0.8 else nbytes
        return operation, (key, bytes(max(size, 0))), {}
    if operation == "evict":
        return operation, (rng.randrange(0, capacity + 1),), {}
    if operation == "clear":
        return operation, (), {}
    return operation, (key,), {}


# Running every edit -------------------------------------------------------------------------------


@dataclass
class Verdict:
    mutation: Mutation
    broken: list[str]  # I1-I6 broken by a random walk
    crashed: str | None  # a walk raised something other than a CacheError
    prove_exit: int | None  # None: timed out
    prove_verdict: bool  # the proof's verdict line was printed (exit 1 is a verdict, not a crash)
    obligations_failed: bool  # a proof obligation failed
    refinement_disagrees: bool  # the refinement check found the spec and the model apart
    first_break: str | None
    seconds: float

    @property
    def breaks_invariant(self) -> bool:
        return any(name in _INVARIANTS_BROKEN for name in self.broken)

    @property
    def caught(self) -> bool:
        return self.prove_exit == 1 and self.prove_verdict


def stage_copy(root: Path, workdir: Path) -> Path:
    """A copy of the package laid out as installed (`cacheproof/`, with spec/ and impl/ inside);
    returns the folder to put on PYTHONPATH."""
    site = workdir / "site"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")

    def links_and_ignored(folder: str, names: list[str]) -> set[str]:  # cacheproof/spec and /impl link to spec/, impl/
        return set(ignore(folder, names)) | ({"spec", "impl"} if Path(folder) == root / "cacheproof" else set())

    shutil.copytree(root / "cacheproof", site / "cacheproof", ignore=links_and_ignored)
    shutil.copytree(root / "spec", site / "cacheproof" / "spec", ignore=ignore)
    shutil.copytree(root / "impl", site / "cacheproof" / "impl", ignore=ignore)
    return site


def run_one(site: Path, mutation: Mutation, args: argparse.Namespace) -> Verdict:
    """Apply the edit in the copy, walk and prove there, undo the edit."""
    target = site / "cacheproof" / mutation.path  # spec/x.py is staged as cacheproof/spec/x.py
    original = target.read_text()
    target.write_text(mutation.apply(original))
    started = time.perf_counter()
    environment = {**os.environ, "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        walk = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--walk-only", str(args.walks), str(args.calls)],
            env=environment, capture_output=True, text=True, timeout=args.timeout, cwd=site,
        )
        walked = json.loads(walk.stdout) if walk.returncode == 0 and walk.stdout.strip() else {
            "broken": {}, "crashed": f"walk exited {walk.returncode}: {walk.stderr.strip().splitlines()[-1:]}"
        }
        try:
            proof = subprocess.run(
                [sys.executable, "-m", "cacheproof", "prove", "--slots", str(args.slots), "--quiet"],
                env=environment, capture_output=True, text=True, timeout=args.timeout, cwd=site,
            )
            prove_exit, verdict = proof.returncode, "obligations proved" in proof.stdout
            proved = re.search(r"(\d+)/(\d+) obligations proved", proof.stdout)
            obligations_failed = proved is not None and proved.group(1) != proved.group(2)
            disagrees = "spec refines model: " in proof.stdout and "DISAGREE" in proof.stdout
        except subprocess.TimeoutExpired:
            prove_exit, verdict, obligations_failed, disagrees = None, False, False, False
    finally:
        target.write_text(original)
    broken = sorted(walked["broken"])
    first = next((walked["broken"][name] for name in broken if name in _INVARIANTS_BROKEN), None)
    return Verdict(
        mutation, broken, walked["crashed"], prove_exit, verdict, obligations_failed, disagrees, first,
        time.perf_counter() - started,
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--files", nargs="+", default=list(DEFAULT_FILES), help="files of spec/ to edit")
    parser.add_argument("--slots", type=int, default=4, help="slots of the per-entry proof (default 4)")
    parser.add_argument("--walks", type=int, default=300, help="random walks per edit (default 300)")
    parser.add_argument("--calls", type=int, default=40, help="calls per walk, at most (default 40)")
    parser.add_argument("--jobs", type=int, default=2, help="edits run at once, each in its own copy (default 2)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per walk or proof (default 600)")
    parser.add_argument("--limit", type=int, help="run only the first N edits (for a quick look)")
    parser.add_argument("--json", type=Path, help="write every verdict to this file")


def run(args: argparse.Namespace) -> int:
    mutations = [m for path in args.files for m in mutations_of(path, (ROOT / path).read_text())]
    if args.limit is not None:
        mutations = mutations[: args.limit]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="prove-mutations-") as scratch:
        sites = [stage_copy(ROOT, Path(scratch) / f"job{j}") for j in range(max(1, args.jobs))]
        free = list(sites)

        def job(mutation: Mutation) -> Verdict:
            site = free.pop()
            try:
                verdict = run_one(site, mutation, args)
            finally:
                free.append(site)
            print(_verdict_line(verdict), flush=True)
            return verdict

        with ThreadPoolExecutor(max_workers=len(sites)) as pool:
            verdicts = list(pool.map(job, mutations))
    wall = time.perf_counter() - started
    report = summarize(verdicts, args, wall)
    print(format_report(report))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0 if not report["missed"] else 1


def _verdict_line(verdict: Verdict) -> str:
    broke = "BREAKS " + ",".join(verdict.broken) if verdict.broken else "no break"
    if verdict.crashed:
        broke += " (crash)"
    caught = "caught" if verdict.caught else ("TIMEOUT" if verdict.prove_exit is None else f"prove exit {verdict.prove_exit}")
    return f"{broke:<22} {caught:<12} {verdict.seconds:6.1f} s  {verdict.mutation.describe()}"


_COLUMNS = ("tried", "broke", "caught", "broke_and_caught", "by_proof", "by_refinement")


def summarize(verdicts: list[Verdict], args: argparse.Namespace, wall: float) -> dict[str, Any]:
    files: dict[str, dict[str, int]] = {}
    for v in verdicts:
        row = files.setdefault(v.mutation.path, dict.fromkeys(_COLUMNS, 0))
        row["tried"] += 1
        row["broke"] += v.breaks_invariant
        row["caught"] += v.caught
        row["broke_and_caught"] += v.breaks_invariant and v.caught
        row["by_proof"] += v.caught and v.obligations_failed
        row["by_refinement"] += v.caught and v.refinement_disagrees
    total = {key: sum(row[key] for row in files.values()) for key in _COLUMNS}
    return {
        "command": "python tools/prove_mutations.py " + " ".join(sys.argv[1:]),
        "slots": args.slots,
        "walks": args.walks,
        "calls": args.calls,
        "wall_seconds": round(wall, 1),
        "total": total,
        "files": files,
        "missed": [asdict(v.mutation) | {"first_break": v.first_break, "broken": v.broken} for v in verdicts if v.breaks_invariant and not v.caught],
        "caught_without_break": sum(v.caught and not v.breaks_invariant for v in verdicts),
        "crashed_walks": sum(v.crashed is not None for v in verdicts),
        "prove_timeouts": sum(v.prove_exit is None for v in verdicts),
        "verdicts": [
            asdict(v.mutation) | {
                "broken": v.broken, "crashed": v.crashed, "prove_exit": v.prove_exit, "caught": v.caught,
                "obligations_failed": v.obligations_failed, "refinement_disagrees": v.refinement_disagrees,
                "seconds": round(v.seconds, 2),
            }
            for v in verdicts
        ],
    }


def format_report(report: dict[str, Any]) -> str:
    lines = [
        "",
        f"{'file':<22} {'tried':>6} {'broke I1-I4':>12} {'caught':>7} {'broke+caught':>13} {'by proof':>9} {'by refinement':>14}",
    ]
    for path, row in [*report["files"].items(), ("total", report["total"])]:
        lines.append(
            f"{path:<22} {row['tried']:>6} {row['broke']:>12} {row['caught']:>7} {row['broke_and_caught']:>13}"
            f" {row['by_proof']:>9} {row['by_refinement']:>14}"
        )
    lines.append(
        f"caught without breaking I1-I4: {report['caught_without_break']}; walks that crashed: "
        f"{report['crashed_walks']}; prove timeouts: {report['prove_timeouts']}; wall {report['wall_seconds']} s"
    )
    if report["missed"]:
        lines.append("broke an invariant but prove passed:")
        lines += [f"  {m['path']}:{m['line']}: {m['old']!r} -> {m['new']!r} in `{m['code']}`" for m in report["missed"]]
    else:
        lines.append("every edit that broke an invariant was caught by `cacheproof prove`")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--walk-only"]:
        print(json.dumps(random_walks(int(argv[1]), int(argv[2]))))
        return 0
    parser = argparse.ArgumentParser(prog="python tools/prove_mutations.py", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
