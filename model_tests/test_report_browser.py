"""The report's page in a real headless Chromium (the system package), with networking blocked.

Chromium loads each page once with `--dump-dom` (the DOM it built: the chart's SVG elements, the
marked call, the state diff's rows) and `--screenshot` (kept under test-artifacts/ at the root of
the repository, with the page: a PNG of the window's size that is not blank and shows the red mark).
Chromium runs with every host resolving nowhere and a dead proxy, and writes a net log; no request
may come from the page (a control page with an http:// image shows the check sees one).
Without Chromium on PATH the module skips as one, with the one summary line `BROWSER_MISSING`
(saying what to install), so the README's test command passes on a fresh machine; under CI (the
environment variable CI set, as .ci/run does, which installs Chromium) each test fails with that
line instead.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import numpy
import pytest

from cacheproof.cli import main
from model_tests.browser import BROWSER_MISSING, find_browser, under_ci
from model_tests.test_report import monitored_divergence

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
WINDOW = (1200, 1600)
MARK_RGB = (0xC6, 0x28, 0x28)  # cacheproof.report.chart.MARK_COLOUR
BROWSER_ORIGIN = "not an origin"
"""The initiator Chromium's net log gives its own requests (updates, accounts); a page's have its origin."""


if find_browser() is None and not under_ci():
    pytest.skip(BROWSER_MISSING, allow_module_level=True)  # one skip, one summary line (-rs, pyproject.toml)


def chromium() -> str:
    """The browser's path; a failure saying what to install when it is missing (under CI: outside
    CI the module skipped at collection)."""
    found = find_browser()
    if found is None:
        pytest.fail(BROWSER_MISSING, pytrace=False)
    return found


@pytest.fixture(autouse=True)
def browser() -> str:
    """The browser, looked up before a test does any work."""
    return chromium()


def run_chromium(page: Path, profile: Path, *extra: str) -> subprocess.CompletedProcess:
    """Chromium on `page` with networking blocked: every host resolves nowhere, the proxy is dead."""
    command = [
        chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
        f"--user-data-dir={profile}", f"--window-size={WINDOW[0]},{WINDOW[1]}", *extra, page.resolve().as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def page_requests(net_log: Path) -> list[str]:
    """The URLs of the requests the page (not the browser itself) started, from a --log-net-log file."""
    log = json.loads(net_log.read_text())
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    starts = [event.get("params", {}) for event in log["events"] if event["type"] == start]
    return [params["url"] for params in starts if "url" in params and params.get("initiator") != BROWSER_ORIGIN]


class Elements(HTMLParser):
    """Every element of a DOM dump, as (tag, attributes), and the text of each table row by id/class."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict]] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.elements.append((tag, dict(attrs)))

    def having(self, tag: str, **wanted: str) -> list[dict]:
        return [attrs for name, attrs in self.elements if name == tag
                and all(value in (attrs.get(key.rstrip("_")) or "").split() or attrs.get(key.rstrip("_")) == value
                        for key, value in wanted.items())]


def png_pixels(path: Path) -> numpy.ndarray:
    """The pixels of an 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes), height x width x
    channels, decoded with zlib and the five PNG row filters."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    position, chunks = 8, {}
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position:position + 8])
        chunks.setdefault(kind, []).append(data[position + 8:position + 8 + length])
        position += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunks[b"IHDR"][0])
    assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
    channels = 3 if colour == 2 else 4
    raw = numpy.frombuffer(zlib.decompress(b"".join(chunks[b"IDAT"])), dtype=numpy.uint8)
    rows = raw.reshape(height, width * channels + 1)
    pixels = numpy.zeros((height, width * channels), dtype=numpy.uint8)
    previous = numpy.zeros(width * channels, dtype=numpy.int32)
    for y in range(height):
        kind, line = rows[y, 0], rows[y, 1:].astype(numpy.int32)
        if kind == 1:  # Sub: a running sum per channel
            line = numpy.cumsum(line.reshape(width, channels), axis=0).reshape(-1) % 256
        elif kind == 2:  # Up
            line = (line + previous) % 256
        elif kind in (3, 4):  # Average, Paeth: each byte needs the one decoded left of it
            line = _left_dependent(line.tolist(), previous.tolist(), channels, kind)
        pixels[y] = line
        previous = line.astype(numpy.int32)
    return pixels.reshape(height, width, channels)


def _left_dependent(line: list[int], above: list[int], channels: int, kind: int) -> numpy.ndarray:
    out = [0] * len(line)
    for i, value in enumerate(line):
        left = out[i - channels] if i >= channels else 0
        up, up_left = above[i], above[i - channels] if i >= channels else 0
        if kind == 3:
            predicted = (left + up) // 2
        else:
            estimate = left + up - up_left
            distances = (abs(estimate - left), abs(estimate - up), abs(estimate - up_left))
            predicted = (left, up, up_left)[distances.index(min(distances))]
        out[i] = (value + predicted) % 256
    return numpy.array(out, dtype=numpy.int32)


def look_at(page: Path, name: str, tmp_path: Path, marked: bool = True) -> Elements:
    """Load `page` in Chromium (DOM, and a screenshot kept as test-artifacts/NAME.png) and check what
    every page must be: no request of its own, a PNG of the window's size, not blank, the mark drawn
    (unless not `marked`: a conforming run's page has no diverging call)."""
    net_log = tmp_path / f"{name}-net.json"
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / f"{name}.png"
    shot.unlink(missing_ok=True)
    dump = run_chromium(page, tmp_path / "profile", f"--log-net-log={net_log}", f"--screenshot={shot}", "--dump-dom")
    assert page_requests(net_log) == []
    shutil.copy(page, ARTIFACTS / f"{name}.html")
    print(f"screenshot: {shot}")
    pixels = png_pixels(shot)[:, :, :3].astype(numpy.uint32)
    assert pixels.shape[:2] == (WINDOW[1], WINDOW[0])
    packed = pixels[:, :, 0] << 16 | pixels[:, :, 1] << 8 | pixels[:, :, 2]
    colours = len(numpy.unique(packed))
    assert colours > 50, f"{colours} colours: a blank page?"
    red, green, blue = MARK_RGB
    if marked:
        assert (packed == red << 16 | green << 8 | blue).sum() > 100, "the diverging call's red mark is not drawn"
    elements = Elements()
    elements.feed(dump.stdout)
    return elements


def test_the_net_log_check_sees_a_page_that_loads_something(tmp_path):
    control = tmp_path / "control.html"
    control.write_text('<!DOCTYPE html><html><body><img src="http://192.0.2.7/pixel.png"></body></html>')
    net_log = tmp_path / "net.json"
    run_chromium(control, tmp_path / "profile", f"--log-net-log={net_log}", "--dump-dom")
    assert page_requests(net_log) == ["http://192.0.2.7/pixel.png"]


def test_the_page_of_a_monitor_trace_in_chromium(tmp_path, capsys):
    trace = tmp_path / "monitor.jsonl"
    calls = monitored_divergence(trace, rounds=40)
    page = tmp_path / "monitor.html"
    assert main(["report", str(trace), "-o", str(page)]) == 0
    text = page.read_text()
    assert not any(marker in text for marker in ('src="http', "src='http", 'href="http', "href='http", "url(http"))
    dom = look_at(page, "report-monitor-trace", tmp_path)
    assert len(dom.having("svg", class_="chart")) == 1
    assert sorted(attrs["data-figure"] for attrs in dom.having("path", class_="band")) == ["idle", "in use", "reserved"]
    assert sorted(attrs["data-figure"] for attrs in dom.having("path", class_="line")) == ["capacity", "ready"]
    assert [attrs["data-step"] for attrs in dom.having("rect", class_="marked-call")] == [str(calls)]
    assert dom.having("tr", id=f"case-1-call-{calls}")[0]["class"] == "marked"
    assert len(dom.having("tr", class_="differs")) == 1  # the outcome: a trace holds nothing of the cache's state
    assert len(dom.having("tr", class_="unknown")) >= 8


def test_the_page_of_a_check_report_in_chromium(tmp_path):
    report = tmp_path / "check.json"
    assert main(["check", "--impl", "model_tests.broken_caches:EvictsPinnedEntries", "--examples", "30", "--steps", "30",
                 "--seed", "1", "--max-divergences", "1", "--json", str(report), "--quiet"]) == 1
    divergence = json.loads(report.read_text())["divergences"][0]
    page = tmp_path / "check.html"
    assert main(["report", str(report), "-o", str(page)]) == 0
    dom = look_at(page, "report", tmp_path)
    calls = len(divergence["calls"])
    assert [attrs["data-step"] for attrs in dom.having("rect", class_="marked-call")] == [str(calls)]
    assert dom.having("tr", id=f"case-1-call-{calls}")[0]["class"] == "marked"
    differing = len(dom.having("tr", class_="differs"))
    assert differing >= len(divergence["differences"]) - 1  # a snapshot difference may be one row per entry
    assert dom.having("pre", class_="snippet") and dom.having("table", class_="invariants")


def test_the_page_of_a_block_pool_check_report_in_chromium(tmp_path):
    report = tmp_path / "blocks.json"
    assert main(["check", "--spec", "blocks", "--impl", "model_tests.block_pools:DoubleFreePool", "--examples", "10", "--steps", "20",
                 "--seed", "1", "--max-divergences", "1", "--json", str(report), "--quiet"]) == 1
    page = tmp_path / "blocks.html"
    assert main(["report", str(report), "-o", str(page)]) == 0
    dom = look_at(page, "report-blocks", tmp_path)
    assert {attrs["data-figure"] for attrs in dom.having("path", class_="line")} == {"usable", "in use", "free", "cached"}
    assert dom.having("tr", class_="differs")


def test_the_page_of_a_pool_breaking_an_invariant_shows_both_series_in_chromium(tmp_path):
    report = tmp_path / "owner-blind.json"
    assert main(["check", "--spec", "blocks", "--impl", "model_tests.block_pools:OwnerBlindFreePool", "--seed", "1",
                 "--max-divergences", "1", "--json", str(report), "--quiet"]) == 1
    (divergence,) = json.loads(report.read_text())["divergences"]
    assert [found["name"] for found in divergence["broken_invariants"]] == ["B7"]
    page = tmp_path / "owner-blind.html"
    assert main(["report", str(report), "-o", str(page)]) == 0
    dom = look_at(page, "report-owner-blind", tmp_path)
    # the spec's series and the implementation's beside it, every figure but the ceiling
    assert {attrs["data-figure"] for attrs in dom.having("path", class_="line")} == {"usable", "in use", "free", "cached"}
    assert {attrs["data-figure"] for attrs in dom.having("path", class_="implementation")} == {"in use", "free", "cached"}
    assert len(dom.having("circle", class_="implementation-value")) == 3
    assert dom.having("li", id="case-1-breaks-B7")
    assert dom.having("tr", id="invariant-B7")[0]["class"] == "broken"
    assert all(row["class"] != "broken" for name in ("B1", "B2", "B3") for row in dom.having("tr", id=f"invariant-{name}"))
    html = page.read_text()
    assert "your implementation breaks B7</text>" in html  # the marked call's label
    assert "white-space: pre-wrap" in html.split("pre {", 1)[1].split("}", 1)[0]  # the code wraps


def test_the_page_of_a_conforming_check_in_chromium(tmp_path):
    report = tmp_path / "ok.json"
    assert main(["check", "--spec", "blocks", "--examples", "10", "--steps", "20", "--seed", "1", "--json", str(report),
                 "--quiet"]) == 0
    operations = json.loads(report.read_text())["coverage"]["operations"]
    page = tmp_path / "ok.html"
    assert main(["report", str(report), "-o", str(page)]) == 0
    dom = look_at(page, "report-ok", tmp_path, marked=False)
    drawn = {(attrs["data-operation"], attrs["data-outcome"]) for attrs in dom.having("rect", class_="reached")}
    assert drawn == {(operation, outcome) for operation, outcomes in operations.items()
                     for outcome, count in outcomes.items() if count}
    assert dom.having("svg", class_="coverage") and dom.having("table", class_="figures")
