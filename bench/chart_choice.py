"""The console's activity charts: SVG drawn by the page (console.js) against a vendored chart
library (uPlot, the smallest well-known one), by page weight and by first view.

    npm pack uplot@1.6.32 && tar xzf uplot-1.6.32.tgz       # the library, to measure only
    python bench/chart_choice.py --uplot package/dist [--points 2160] [--loads 15]

Both pages are the console's script and stylesheet plus the charts, as the console would be:
both draw the console's six charts (messages; review runs; facts, four series stacked;
compactions; model tokens; model errors) from one GetActivity answer of `--points` buckets
(2,160: 90 days by the hour, the most the RPC returns). Each page is served from loopback by a
plain HTTP server and loaded by Debian's headless chromium `--loads` times afresh; the figure is
the time from navigation to the last chart drawn (performance.now() then), so it holds the
scripts' download, parse and run. The weight is what the page must fetch for its charts: for
SVG, the chart code of console.js and console.css (the part between their `activity` markers);
for uPlot, its minified script and stylesheet plus the code that feeds it, gzipped as a server
would send them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import gzip
import http.server
import json
import random
import re
import statistics
import sys
import tempfile
import threading
from pathlib import Path

from selenium import webdriver

ROOT = Path(__file__).resolve().parent.parent
ASSETS = ROOT / "server" / "memoryd" / "console" / "assets"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SHELL = (
    '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>charts</title>{head}'
    '</head><body><nav id="nav" hidden></nav><button id="sign-out" hidden></button>'
    '<main id="main"></main><div id="status"></div><div id="charts"></div>{body}</body></html>'
)
# Both pages finish the same way: the time since navigation once the charts are drawn.
OURS = """
fetch("data.json").then((r) => r.json()).then((answer) => {
  document.getElementById("charts").append(...activityCharts(answer, "HOUR").flat());
  window.drawn = performance.now();
});
"""
# uPlot draws to canvas; stacked series are summed by the caller, as its own demos do.
UPLOT = """
const CHARTS = [["Messages stored", ["messages"]], ["Review runs", ["succeeded", "reviewFailures"]],
  ["Facts", ["factsAdded", "factsReplaced", "factsArchived", "factsRefused"]],
  ["Compactions", ["compactions"]], ["Model tokens", ["modelTokens"]],
  ["Model errors", ["modelErrors"]]];
const COLOURS = ["#0b5cad", "#a4161a", "#b8860b", "#6b7d8c"];
fetch("data.json").then((r) => r.json()).then((answer) => {
  const xs = answer.points.map((p) => Date.parse(p.startTime) / 1000);
  const value = (p, key) => key === "succeeded"
    ? Number(p.counts.reviewRuns || 0) - Number(p.counts.reviewFailures || 0)
    : Number(p.counts[key] || 0);
  for (const [title, keys] of CHARTS) {
    const stacked = [];
    let below = answer.points.map(() => 0);
    for (const key of keys) {
      below = below.map((sum, i) => sum + value(answer.points[i], key));
      stacked.push(below);
    }
    // The running sums, tallest first, so each series' bar shows above the one below it.
    const series = [{}, ...keys.map((key, i) => ({ label: key, fill: COLOURS[i], stroke: COLOURS[i],
      paths: uPlot.paths.bars({ size: [0.8] }) })).reverse()];
    const holder = document.createElement("figure");
    document.getElementById("charts").append(holder);
    new uPlot({ title, width: 360, height: 110, series }, [xs, ...stacked.reverse()], holder);
  }
  window.drawn = performance.now();
});
"""
WAIT = """
const done = arguments[arguments.length - 1];
(function look() { if (window.drawn) done(window.drawn); else setTimeout(look, 2); })();
"""


def answer(points: int, rng: random.Random) -> dict[str, object]:
    """A GetActivity answer as the JSON API writes it (int64 as strings, zeros left out)."""
    names = (
        "messages",
        "compactions",
        "reviewRuns",
        "reviewFailures",
        "factsAdded",
        "factsReplaced",
        "factsArchived",
        "factsRefused",
        "modelTokens",
        "modelErrors",
    )
    start = 1_700_000_000 - 1_700_000_000 % 3600
    found = []
    for index in range(points):
        counts = {name: str(rng.randrange(0, 400)) for name in names if rng.random() < 0.8}
        stamp = start + index * 3600
        found.append({"startTime": f"{_iso(stamp)}", "counts": counts})
    return {"points": found, "total": {}, "bucket": "ACTIVITY_BUCKET_HOUR"}


def _iso(seconds: int) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def between_markers(text: str, start: str, end: str) -> str:
    """The part of a file from one marker to the next."""
    found = re.search(re.escape(start) + ".*?(?=" + re.escape(end) + ")", text, re.S)
    if not found:
        raise SystemExit(f"no {start!r} .. {end!r} in the console's files")
    return found.group(0)


def gzipped(*texts: str) -> int:
    return len(gzip.compress("".join(texts).encode(), 9))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uplot", type=Path, required=True, help="uPlot's dist folder")
    parser.add_argument("--points", type=int, default=2160)
    parser.add_argument("--loads", type=int, default=15)
    args = parser.parse_args()
    script = (ASSETS / "console.js").read_text(encoding="utf-8")
    style = (ASSETS / "console.css").read_text(encoding="utf-8")
    uplot_js = (args.uplot / "uPlot.iife.min.js").read_text(encoding="utf-8")
    uplot_css = (args.uplot / "uPlot.min.css").read_text(encoding="utf-8")
    ours_code = between_markers(script, "// --- activity", "// --- routing")
    ours_style = between_markers(style, ".chart-grid", "ul.applied")
    weights = {
        "svg": {
            "bytes": len((ours_code + ours_style).encode()),
            "gzip": gzipped(ours_code, ours_style),
        },
        "uplot": {
            "bytes": len((uplot_js + uplot_css + UPLOT).encode()),
            "gzip": gzipped(uplot_js, uplot_css, UPLOT),
        },
    }
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        (folder / "data.json").write_text(json.dumps(answer(args.points, random.Random(7))))
        (folder / "console.js").write_text(script, encoding="utf-8")
        (folder / "console.css").write_text(style, encoding="utf-8")
        (folder / "uPlot.iife.min.js").write_text(uplot_js, encoding="utf-8")
        (folder / "uPlot.min.css").write_text(uplot_css, encoding="utf-8")
        (folder / "ours.js").write_text(OURS, encoding="utf-8")
        (folder / "uplot-run.js").write_text(UPLOT, encoding="utf-8")
        (folder / "svg.html").write_text(
            SHELL.format(
                head='<link rel="stylesheet" href="console.css">',
                body='<script src="console.js"></script><script src="ours.js"></script>',
            )
        )
        (folder / "uplot.html").write_text(
            SHELL.format(
                head='<link rel="stylesheet" href="console.css">'
                '<link rel="stylesheet" href="uPlot.min.css">',
                body='<script src="console.js"></script><script src="uPlot.iife.min.js"></script>'
                '<script src="uplot-run.js"></script>',
            )
        )
        handler = functools.partial(Quiet, directory=str(folder))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            times = measure(f"127.0.0.1:{server.server_address[1]}", args.loads)
        finally:
            server.shutdown()
    result = {"points": args.points, "loads": args.loads, "weight": weights, "first_view": times}
    print(json.dumps(result, indent=2))
    return 0


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *_args: object) -> None:
        pass


def measure(address: str, loads: int) -> dict[str, dict[str, float]]:
    """Each page's time to its last chart, alternating the two so both see the same noise."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    chrome = webdriver.Chrome(options=options, service=webdriver.ChromeService(CHROMEDRIVER))
    try:
        seen: dict[str, list[float]] = {"svg": [], "uplot": []}
        for _ in range(loads + 1):
            for name, found in seen.items():
                chrome.get("about:blank")
                chrome.get(f"http://{address}/{name}.html")
                found.append(float(chrome.execute_async_script(WAIT)))
        return {
            name: {
                "first_load_ms": round(found[0], 1),
                "p50_ms": round(statistics.median(found[1:]), 1),
            }
            for name, found in seen.items()
        }
    finally:
        chrome.quit()


if __name__ == "__main__":
    sys.exit(main())
