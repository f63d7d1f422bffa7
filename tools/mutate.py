"""Mutation testing of spec/ and impl/ with mutmut, the model tests as the killer, for the project's
developers (not part of the installed package):

    python tools/mutate.py [--paths spec impl/tensor_lru_cache.py] [--tests T ...] [--json report.json]


mutmut 3 names a mutant after the module its file path spells, so the sources are staged in a scratch
workspace as `src/<package>/...` following the package-dir mapping in pyproject.toml (spec/ becomes
src/cacheproof/spec/). Nothing in the working tree is ever mutated. Exit 0 when every path reaches the
target score, 1 when one does not, 2 when mutmut is missing or the run fails. Each path gets its own
mutmut run in its own staged folder: one run over spec/ and impl/ together reported nearly every mutant
as surviving, while the same mutants run path by path are killed.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path

DEFAULT_PATHS = ["spec", "impl/tensor_lru_cache.py", "impl/lru_entries.py", "impl/tensor_values.py"]
DEFAULT_TESTS = [
    "model_tests/test_cache_contract.py",
    "model_tests/test_rules.py",
    "model_tests/test_invariants.py",
    "model_tests/test_transitions.py",
    "model_tests/test_tensor_lru_cache.py",
    "model_tests/test_differential.py",
    "model_tests/test_mutation_killers.py",
]
DEFAULT_TARGET = 95.0
INSTALL_HINT = "pip install 'mutmut>=3'  (or: pip install -e '.[mutate]')"

# A mutant that deadlocks waits out its timeout: this many times its tests' clean duration, plus 1 s.
_TIMEOUT_MULTIPLIER = 5.0
_KILLED_STATUSES = frozenset({"killed", "timeout"})
# mutmut runs each mutant in a child forked from a process that already ran torch; there, mutants of
# code the tests barely touch (device resolution, CUDA-only stream hand-off) were reported as timeouts
# although the same tests pass in seconds in a fresh process. A timeout is therefore rechecked: the
# killer tests run once more in a new interpreter with the mutant active. Tests fail: killed. Tests
# pass: survived. Still running after the limit: a real timeout (counted as killed).
_RECHECK_LIMIT_S = 300.0
# Folders of committed files that tests read, copied beside the tests when the repository has them.
_TEST_DATA_FOLDERS = ("docs",)
_IGNORED_WHEN_STAGING = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "mutants")
_HYPOTHESIS_PROFILE_FOR_MUTANTS = '''

# Added by tools/mutate.py: mutmut reruns the tests in one process, so each test meets new
# executors; the verdict of a mutant must not depend on a stored or random example.
from hypothesis import HealthCheck as _HealthCheck, settings as _settings

_settings.register_profile(
    "cacheproof-mutation",
    _settings(
        _settings.default,
        database=None,
        derandomize=True,
        suppress_health_check=[*_settings.default.suppress_health_check, _HealthCheck.differing_executors],
    ),
)
_settings.load_profile("cacheproof-mutation")
'''


@dataclass
class PathScore:
    """Mutants of one requested path: killed (or timed out) out of all generated."""

    path: str
    killed: int = 0
    total: int = 0

    @property
    def percent(self) -> float:
        return 100.0 if self.total == 0 else 100.0 * self.killed / self.total


@dataclass
class Survivor:
    """A mutant the tests did not kill: where it is, what it changed, and mutmut's verdict."""

    name: str
    path: str
    line: int | None
    status: str
    diff: str


@dataclass
class MutationReport:
    """Scores per requested path and the surviving mutants."""

    target: float
    scores: list[PathScore]
    survivors: list[Survivor] = field(default_factory=list)

    @property
    def met(self) -> bool:
        return all(score.percent >= self.target for score in self.scores)

    def to_json(self) -> dict[str, object]:
        return {
            "tool": "mutmut",
            "target": self.target,
            "met": self.met,
            "scores": [{**asdict(score), "percent": round(score.percent, 2)} for score in self.scores],
            "survivors": [asdict(survivor) for survivor in self.survivors],
        }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--paths", nargs="+", default=DEFAULT_PATHS, help=f"files or folders to mutate (default {' '.join(DEFAULT_PATHS)})"
    )
    parser.add_argument("--tests", nargs="+", default=DEFAULT_TESTS, help="the killer tests (pytest paths)")
    parser.add_argument("--target", type=float, default=DEFAULT_TARGET, help="score to reach per path, in percent")
    parser.add_argument("--root", type=Path, default=_repository_root(), help="the repository to stage")
    parser.add_argument("--workdir", type=Path, help="stage here and keep it (default: a temporary folder)")
    parser.add_argument("--max-children", type=int, default=os.cpu_count() or 1, help="mutants run in parallel")
    parser.add_argument("--json", type=Path, help="write the report as JSON to this path")
    parser.add_argument(
        "--recheck-limit",
        type=float,
        default=_RECHECK_LIMIT_S,
        help=f"seconds a timed-out mutant's tests may run when rechecked in a fresh process (default {_RECHECK_LIMIT_S:g})",
    )
    parser.add_argument(
        "--no-recheck", action="store_true", help="trust mutmut's timeouts as kills instead of rechecking them"
    )
    parser.add_argument("--quiet", action="store_true", help="print only the scores and the verdict")


def run(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("mutmut") is None:
        print(f"tools/mutate.py: mutmut is not installed; {INSTALL_HINT}", file=sys.stderr)
        return 2
    root = args.root.resolve()
    workdir = args.workdir.resolve() if args.workdir else Path(tempfile.mkdtemp(prefix="cacheproof-mutation-"))
    scores: list[PathScore] = []
    survivors: list[Survivor] = []
    for index, path in enumerate(args.paths):
        path_workdir = workdir / f"{index}-{re.sub(r'[^A-Za-z0-9_.-]', '_', path)}"
        try:
            staged = stage_workspace(root, path_workdir, [path], args.tests)
        except (OSError, ValueError) as error:
            print(f"tools/mutate.py: {error}", file=sys.stderr)
            return 2
        if not args.quiet:
            print(f"tools/mutate.py: {path} staged in {path_workdir}; mutmut log: {path_workdir / 'mutmut.log'}")
        if not _run_mutmut(path_workdir, args.max_children):
            print(f"tools/mutate.py: mutmut failed, see {path_workdir / 'mutmut.log'}", file=sys.stderr)
            return 2
        rechecked = {} if args.no_recheck else recheck_timeouts(path_workdir, args.tests, args.recheck_limit)
        path_report = read_report(path_workdir, staged, args.target, rechecked)
        scores.extend(path_report.scores)
        survivors.extend(path_report.survivors)
    report = MutationReport(target=args.target, scores=scores, survivors=survivors)
    print(format_report(report, quiet=args.quiet))
    if args.json is not None:
        args.json.write_text(json.dumps(report.to_json(), indent=2) + "\n")
    if args.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if report.met else 1


def stage_workspace(root: Path, workdir: Path, paths: list[str], tests: list[str]) -> dict[str, str]:
    """Copy the packages under workdir/src as their import names spell them, the tests beside them,
    and write the mutmut and pytest configuration; return each requested path's staged path."""
    package_dirs = _package_dirs(root)
    if (workdir / "src").exists():
        shutil.rmtree(workdir / "src")
    for package, folder in sorted(package_dirs.items(), key=lambda item: item[0].count(".")):
        shutil.copytree(root / folder, workdir / "src" / package.replace(".", "/"), ignore=_IGNORED_WHEN_STAGING, dirs_exist_ok=True)
    staged_paths = {path: _staged_path(path, package_dirs) for path in paths}
    for path, staged in staged_paths.items():
        if not (workdir / staged).exists():
            raise ValueError(f"{path} is not inside a package of {root}")
    test_roots = sorted({Path(test).parts[0] for test in tests})
    for test_root in test_roots:
        source = root / test_root
        if source.is_dir():
            shutil.copytree(source, workdir / test_root, ignore=_IGNORED_WHEN_STAGING, dirs_exist_ok=True)
        else:
            shutil.copy2(source, workdir / test_root)
    also_copy = [*test_roots, "conftest.py"]
    for data_folder in _TEST_DATA_FOLDERS:
        if (root / data_folder).is_dir():
            # Tests compare generated text with committed files (docs/lifecycle.md).
            shutil.copytree(root / data_folder, workdir / data_folder, ignore=_IGNORED_WHEN_STAGING, dirs_exist_ok=True)
            also_copy.append(data_folder)
    conftest = root / "conftest.py"
    conftest_text = conftest.read_text() if conftest.exists() else ""
    (workdir / "conftest.py").write_text(conftest_text + _HYPOTHESIS_PROFILE_FOR_MUTANTS)
    (workdir / "pyproject.toml").write_text(_mutmut_config(list(staged_paths.values()), tests, also_copy))
    return staged_paths


def read_report(
    workdir: Path, staged_paths: dict[str, str], target: float, rechecked: dict[str, str] | None = None
) -> MutationReport:
    """Score each requested path from mutmut's per-file results, and describe every survivor.
    `rechecked` maps a mutant name to the status a recheck gave it; it replaces mutmut's."""
    from mutmut.stats import status_by_exit_code

    rechecked = rechecked or {}

    scores = {path: PathScore(path) for path in staged_paths}
    survivors: list[Survivor] = []
    for meta in sorted((workdir / "mutants").rglob("*.py.meta")):
        staged_file = meta.relative_to(workdir / "mutants").with_suffix("").as_posix()
        owner = _owning_path(staged_file, staged_paths)
        if owner is None:
            continue
        source_file = _source_path(owner, staged_paths[owner], staged_file)
        exit_codes: dict[str, int | None] = json.loads(meta.read_text())["exit_code_by_key"]
        for name, exit_code in sorted(exit_codes.items(), key=lambda item: _mutant_order(item[0])):
            status = rechecked.get(name, status_by_exit_code[exit_code])
            scores[owner].total += 1
            if status in _KILLED_STATUSES:
                scores[owner].killed += 1
                continue
            diff = _mutant_diff(workdir, name)
            line = mutant_line(workdir / staged_file, name, diff)
            survivors.append(Survivor(name=name, path=source_file, line=line, status=status, diff=diff))
    return MutationReport(target=target, scores=list(scores.values()), survivors=survivors)


def recheck_timeouts(workdir: Path, tests: list[str], limit_s: float = _RECHECK_LIMIT_S) -> dict[str, str]:
    """Run the killer tests once more, in a fresh interpreter, for every mutant mutmut timed out:
    "killed" when they fail, "survived (timed out under mutmut only)" when they pass, "timeout" when
    they are still running after limit_s. Returns the new status by mutant name."""
    from mutmut.stats import status_by_exit_code

    rechecked: dict[str, str] = {}
    for meta in sorted((workdir / "mutants").rglob("*.py.meta")):
        exit_codes: dict[str, int | None] = json.loads(meta.read_text())["exit_code_by_key"]
        for name, exit_code in sorted(exit_codes.items(), key=lambda item: _mutant_order(item[0])):
            if status_by_exit_code[exit_code] == "timeout":
                rechecked[name] = _run_tests_with_mutant(workdir / "mutants", name, tests, limit_s)
    return rechecked


def _run_tests_with_mutant(mutants: Path, name: str, tests: list[str], limit_s: float) -> str:
    environment = {**os.environ, "CI": "true", "PYTHONDONTWRITEBYTECODE": "1", "MUTANT_UNDER_TEST": name}
    environment.pop("HYPOTHESIS_PROFILE", None)
    environment["PYTHONPATH"] = str(mutants / "src")
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", *tests]
    try:
        finished = subprocess.run(
            command, cwd=mutants, env=environment, capture_output=True, text=True, timeout=limit_s, check=False
        )
    except subprocess.TimeoutExpired:
        return "timeout"
    return _RECHECK_SURVIVED if finished.returncode == 0 else "killed"


_RECHECK_SURVIVED = "survived (timed out under mutmut only)"


def format_report(report: MutationReport, *, quiet: bool = False) -> str:
    """The scores, one line per path, then (unless quiet) each survivor with its diff, then the verdict."""
    lines = [
        f"{score.path}: {score.killed}/{score.total} killed ({score.percent:.1f}%)" for score in report.scores
    ]
    if not quiet:
        for survivor in report.survivors:
            where = f"{survivor.path}:{survivor.line}" if survivor.line else survivor.path
            lines.append(f"\n{survivor.status}: {where} {survivor.name}")
            lines.extend(f"    {line}" for line in _changed_lines(survivor.diff))
    verdict = "met" if report.met else "NOT met"
    lines.append(f"target {report.target:.1f}% {verdict}; {len(report.survivors)} mutants not killed")
    return "\n".join(lines)


def mutant_line(staged_file: Path, mutant_name: str, diff: str) -> int | None:
    """The line of the original file that the mutant changes: the first removed line of its diff,
    searched for from the start of the mutated function."""
    removed = [line[1:].strip() for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    if not removed or not staged_file.exists():
        return None
    source_lines = staged_file.read_text().splitlines()
    start = _function_start(staged_file, mutant_name) or 1
    for number in range(start, len(source_lines) + 1):
        if source_lines[number - 1].strip() == removed[0]:
            return number
    return start


def _repository_root() -> Path:
    return Path(__file__).resolve().parent.parent


def _package_dirs(root: Path) -> dict[str, str]:
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    setuptools = pyproject.get("tool", {}).get("setuptools", {})
    mapping: dict[str, str] = dict(setuptools.get("package-dir", {}))
    if not mapping:
        raise ValueError(f"{root / 'pyproject.toml'} has no [tool.setuptools.package-dir]")
    return mapping


def _staged_path(path: str, package_dirs: dict[str, str]) -> str:
    """src/<package path>/<rest> for the deepest package folder that holds path."""
    parts = Path(path).parts
    best: tuple[int, str] | None = None
    for package, folder in package_dirs.items():
        folder_parts = Path(folder).parts
        if parts[: len(folder_parts)] == folder_parts and (best is None or len(folder_parts) > best[0]):
            rest = Path(*parts[len(folder_parts) :]) if len(parts) > len(folder_parts) else Path()
            best = (len(folder_parts), (Path("src", *package.split(".")) / rest).as_posix())
    if best is None:
        raise ValueError(f"{path} is not inside a package folder of pyproject.toml")
    return best[1]


def _mutmut_config(staged_paths: list[str], tests: list[str], also_copy: list[str]) -> str:
    only_mutate = [path if path.endswith(".py") else f"{path}/*" for path in staged_paths]
    config = {
        "source_paths": ["src"],
        "only_mutate": only_mutate,
        "also_copy": also_copy,
        "pytest_add_cli_args": ["-p", "no:randomly", "-p", "no:cacheprovider", "-q"],
        "pytest_add_cli_args_test_selection": tests,
        "use_git_change_detection": False,
        "timeout_multiplier": _TIMEOUT_MULTIPLIER,
    }
    body = "\n".join(f"{key} = {json.dumps(value)}" for key, value in config.items())
    return f"[tool.mutmut]\n{body}\n\n[tool.pytest.ini_options]\naddopts = \"-p no:cacheprovider\"\n"


def _run_mutmut(workdir: Path, max_children: int) -> bool:
    environment = {**os.environ, "CI": "true", "PYTHONDONTWRITEBYTECODE": "1"}
    environment.pop("HYPOTHESIS_PROFILE", None)
    environment.pop("PYTHONPATH", None)
    if (workdir / "mutants").exists():
        shutil.rmtree(workdir / "mutants")
    with (workdir / "mutmut.log").open("w") as log:
        finished = subprocess.run(
            [sys.executable, "-m", "mutmut", "run", "--max-children", str(max(1, max_children))],
            cwd=workdir,
            env=environment,
            stdout=log,
            stderr=subprocess.STDOUT,
            check=False,
        )
    return finished.returncode == 0 and (workdir / "mutants").is_dir()


def _mutant_diff(workdir: Path, mutant_name: str) -> str:
    shown = subprocess.run(
        [sys.executable, "-m", "mutmut", "show", mutant_name],
        cwd=workdir,
        capture_output=True,
        text=True,
        check=False,
    )
    return "\n".join(line for line in shown.stdout.splitlines() if not line.startswith("# "))


def _changed_lines(diff: str) -> list[str]:
    return [
        line
        for line in diff.splitlines()
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


def _owning_path(staged_file: str, staged_paths: dict[str, str]) -> str | None:
    for path, staged in staged_paths.items():
        if staged_file == staged or staged_file.startswith(staged.rstrip("/") + "/"):
            return path
    return None


def _source_path(path: str, staged: str, staged_file: str) -> str:
    """The working-tree path of a staged file: the requested path plus what follows its staged path."""
    rest = staged_file[len(staged) :].lstrip("/")
    return (Path(path) / rest).as_posix() if rest else path


def _mutant_order(name: str) -> tuple[str, int]:
    match = re.search(r"__mutmut_(\d+)$", name)
    return (name[: match.start()] if match else name, int(match.group(1)) if match else 0)


def _function_start(staged_file: Path, mutant_name: str) -> int | None:
    """The def line of the function a mutant name points at (`module.x_function__mutmut_3` or
    `module.xǁClassǁmethod__mutmut_3`)."""
    qualified = mutant_name.rsplit(".", 1)[-1]
    qualified = re.sub(r"__mutmut_\d+$", "", qualified)
    if qualified.startswith("xǁ"):
        names = [part for part in qualified[2:].split("ǁ") if part]
    else:
        names = [qualified.removeprefix("x_")]
    scope: list[ast.stmt] = ast.parse(staged_file.read_text()).body
    found: ast.stmt | None = None
    for name in names:
        found = next(
            (
                node
                for node in scope
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name
            ),
            None,
        )
        if found is None:
            return None
        scope = found.body
    return found.lineno if found is not None else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/mutate.py", description=__doc__.splitlines()[0])
    add_arguments(parser)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return 0 if exit_.code == 0 else 2
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
