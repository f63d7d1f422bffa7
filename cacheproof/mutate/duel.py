"""The duel: each mutant of a module run by `cacheproof check` (one check, or several in order
until one kills: cacheproof kills the mutant when any does) and, when given, by the user's test
command; the verdict of both sides per mutant, the table of counts, and the JSON report's body.

Categories with a test command: BOTH, CACHEPROOF_ONLY, TESTS_ONLY, NEITHER (which side killed the
mutant). Without one: KILLED or SURVIVED (by cacheproof).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from cacheproof.mutate.operators import Mutant
from cacheproof.mutate.sides import TIMED_OUT, SideResult

BOTH = "both"
CACHEPROOF_ONLY = "cacheproof only"
TESTS_ONLY = "tests only"
NEITHER = "neither"
KILLED_BY_CACHEPROOF = "killed"
SURVIVED_CACHEPROOF = "survived"
DUEL_CATEGORIES = (BOTH, CACHEPROOF_ONLY, TESTS_ONLY, NEITHER)
ALONE_CATEGORIES = (KILLED_BY_CACHEPROOF, SURVIVED_CACHEPROOF)


@dataclass(frozen=True)
class MutantResult:
    """One mutant, what it changes (`diff`) and what each side did with it (`tests` None: no command);
    `killing_check` is the number, from 1 (the --impl check), of the check that killed it, None when
    every check survived."""

    mutant: Mutant
    diff: str
    cacheproof: SideResult
    killing_check: int | None
    tests: SideResult | None

    @classmethod
    def of_checks(cls, mutant: Mutant, diff: str, checks: Sequence[SideResult],
                  tests: SideResult | None) -> MutantResult:
        """The result whose cacheproof side is `checks`, the results of the checks run in order until
        one killed (sides.checks_until_killed): the last one's status, exit code and output (the
        killing check's, or the last survivor's) with the seconds of them all summed."""
        last = checks[-1]
        cacheproof = SideResult(last.status, last.exit_code, sum(check.seconds for check in checks), last.output_tail)
        return cls(mutant, diff, cacheproof, len(checks) if last.killed else None, tests)

    @property
    def category(self) -> str:
        if self.tests is None:
            return KILLED_BY_CACHEPROOF if self.cacheproof.killed else SURVIVED_CACHEPROOF
        if self.cacheproof.killed:
            return BOTH if self.tests.killed else CACHEPROOF_ONLY
        return TESTS_ONLY if self.tests.killed else NEITHER

    def to_json(self) -> dict[str, object]:
        return {
            "number": self.mutant.number, "operator": self.mutant.operator, "line": self.mutant.line,
            "description": self.mutant.description, "category": self.category, "diff": self.diff,
            "cacheproof": {**self.cacheproof.to_json(), "check": self.killing_check},
            "tests": None if self.tests is None else self.tests.to_json(),
        }


@dataclass
class Duel:
    """The run so far: the module, the sides' commands (the --impl check's, each --also-check's, the
    tests'), how many mutants exist and were chosen, the results (in mutant order once sorted), and
    whether Ctrl-C ended it early."""

    module: str
    source_path: str
    check_command: Sequence[str]
    also_check_commands: Sequence[Sequence[str]]
    test_command: str | None
    generated: int
    chosen: int
    results: list[MutantResult] = field(default_factory=list)
    interrupted: bool = False

    def check_commands(self) -> list[Sequence[str]]:
        """Every check's command in the order they run: the --impl check's, then each --also-check's."""
        return [self.check_command, *self.also_check_commands]

    def categories(self) -> tuple[str, ...]:
        return ALONE_CATEGORIES if self.test_command is None else DUEL_CATEGORIES

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(self.categories(), 0)
        for result in self.results:
            counts[result.category] += 1
        return counts

    def sorted_results(self) -> list[MutantResult]:
        return sorted(self.results, key=lambda result: result.mutant.number)

    def missed_by_cacheproof(self) -> list[MutantResult]:
        return [result for result in self.sorted_results() if not result.cacheproof.killed]

    def holds(self) -> bool:
        """The verdict: cacheproof kills every mutant the tests kill (with a test command), or every
        mutant run (without one)."""
        missed = TESTS_ONLY if self.test_command is not None else SURVIVED_CACHEPROOF
        return self.counts()[missed] == 0

    def to_json(self) -> dict[str, object]:
        """The body of the `mutate` report (the envelope is added by cmdline.reports)."""
        return {
            "module": self.module, "source_path": self.source_path, "check_command": list(self.check_command),
            "also_check_commands": [list(command) for command in self.also_check_commands],
            "test_command": self.test_command, "mutants_generated": self.generated, "mutants_chosen": self.chosen,
            "mutants_run": len(self.results), "interrupted": self.interrupted, "ok": self.holds(),
            "counts": self.counts(), "mutants": [result.to_json() for result in self.sorted_results()],
        }


def table_lines(duel: Duel) -> list[str]:
    """The counts as a text table: with tests, the 2 x 2 of who kills; without, killed and survived."""
    counts = duel.counts()
    head = f"cacheproof mutate {duel.module}: {len(duel.results)} of {duel.chosen} chosen mutants run " \
           f"({duel.generated} generated){', interrupted' if duel.interrupted else ''}"
    if duel.test_command is None:
        return [head, f"  killed by cacheproof   {counts[KILLED_BY_CACHEPROOF]:>5}",
                f"  survived cacheproof    {counts[SURVIVED_CACHEPROOF]:>5}"]
    width = 18
    return [
        head,
        f"  {'':<{width}}{'tests kill':>12}{'tests miss':>12}",
        f"  {'cacheproof kills':<{width}}{counts[BOTH]:>12}{counts[CACHEPROOF_ONLY]:>12}",
        f"  {'cacheproof misses':<{width}}{counts[TESTS_ONLY]:>12}{counts[NEITHER]:>12}",
        f"  both {counts[BOTH]}, cacheproof only {counts[CACHEPROOF_ONLY]}, tests only {counts[TESTS_ONLY]}, "
        f"neither {counts[NEITHER]}",
    ]


def result_line(result: MutantResult, check_count: int) -> str:
    """One mutant's line: its number, place, change and each side's verdict with its seconds; when the
    duel runs more than one check (`check_count`), which check killed it (`killed by check 2`)."""
    mutant = result.mutant
    which = ""
    if check_count > 1 and result.killing_check is not None:
        which = f" {'in' if result.cacheproof.status == TIMED_OUT else 'by'} check {result.killing_check}"
    sides = f"cacheproof {result.cacheproof.status}{which} ({result.cacheproof.seconds:.1f} s)"
    if result.tests is not None:
        sides += f", tests {result.tests.status} ({result.tests.seconds:.1f} s)"
    return f"#{mutant.number} line {mutant.line} {mutant.operator}: {mutant.description}: {sides}"
