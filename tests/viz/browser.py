"""Open a dashboard in headless Chromium and report what rendered (test and benchmark helper).

How: copy the page with a small script injected first in `<head>` that collects
`window.onerror` / unhandled rejections / `console.error` into an array, and a script last in
`<body>` that, once every plotly figure has finished drawing, writes into the DOM a
`<pre id="clustersim-report">` JSON with the errors, the number of rendered figures
(`.plot-container` holding an `svg.main-svg`) and the time since navigation start. Then run
`chromium --headless --dump-dom` (and `--screenshot`) on the copy and parse the report.
No network access is needed (plotly.js is inline or a local file beside the page) and
none is allowed (`--disable-*`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")

_HEAD = """<script>
window.__errors = [];
window.addEventListener('error', function (e) {
  window.__errors.push('error: ' + (e.message || e.type) + ' at ' + (e.filename || '') + ':'
    + (e.lineno || 0));
});
window.addEventListener('unhandledrejection', function (e) {
  window.__errors.push('unhandled rejection: '
    + (e.reason && (e.reason.stack || e.reason.message) || e.reason));
});
(function () {
  var orig = console.error;
  console.error = function () {
    window.__errors.push('console.error: ' + Array.prototype.join.call(arguments, ' '));
    return orig.apply(console, arguments);
  };
})();
</script>"""

_TAIL = """<script>
(function () {
  // runs right after the page's own inline scripts (Plotly.newPlot draws synchronously), so
  // performance.now() here is the real parse + draw time when no virtual time is used
  var syncMs = performance.now();
  function report(final) {
    var plots = document.querySelectorAll('.js-plotly-plot');
    var rendered = 0;
    plots.forEach(function (p) {
      if (p.querySelector('.plot-container svg.main-svg')) { rendered += 1; }
    });
    var pre = document.getElementById('clustersim-report');
    if (!pre) {
      pre = document.createElement('pre'); pre.id = 'clustersim-report'; document.body.appendChild(pre);
    }
    var figures = [];
    plots.forEach(function (p) {
      var title = p.layout && p.layout.title ? (p.layout.title.text || p.layout.title) : '';
      // _fullData holds the arrays plotly decoded (the figure JSON may carry them base64)
      figures.push({id: p.id, title: String(title), traces: (p._fullData || p.data || []).map(function (t) {
        var xs = t.x || [], ys = t.y || [], n = Math.max(xs.length || 0, ys.length || 0,
          (t.z || []).length || 0, (t.values || []).length || 0);
        var sumX = 0;
        for (var i = 0; i < (xs.length || 0); i++) { if (typeof xs[i] === 'number') { sumX += xs[i]; } }
        var perY = {};
        if (t.type === 'bar' && t.orientation === 'h') {
          for (var j = 0; j < n; j++) {
            if (typeof xs[j] === 'number') { perY[ys[j]] = (perY[ys[j]] || 0) + xs[j]; }
          }
        }
        return {name: t.name || '', type: t.type || '', n: n, sum_x: sumX, per_y: perY,
                visible: t.visible === undefined ? true : t.visible, index: t.index,
                meta: t.meta || null, text: t.text || null};
      })});
    });
    pre.textContent = JSON.stringify({
      errors: window.__errors, plots: plots.length, rendered: rendered,
      sync_ms: syncMs, final: final, figures: figures
    });
  }
  report(false);
  function done() {
    var plots = Array.prototype.slice.call(document.querySelectorAll('.js-plotly-plot'));
    var waits = plots.map(function (p) {
      return p._promises ? Promise.all(p._promises) : Promise.resolve();
    });
    Promise.all(waits).then(function () {
      requestAnimationFrame(function () { report(true); });
    }, function (err) { window.__errors.push('plot promise: ' + err); report(true); });
  }
  if (document.readyState === 'complete') { done(); } else { window.addEventListener('load', done); }
})();
</script>"""

_REPORT = re.compile(r'<pre id="clustersim-report">(.*?)</pre>', re.DOTALL)


def find_chromium() -> str | None:
    """Path of a Chromium/Chrome binary ($CHROMIUM overrides), or None."""
    env = os.environ.get("CHROMIUM")
    if env and Path(env).is_file():
        return env
    for name in CANDIDATES:
        p = shutil.which(name)
        if p:
            return p
    return None


@dataclass
class Rendered:
    """What a headless Chromium saw on a page."""

    figures_expected: int
    plots: int
    figures_rendered: int
    errors: list[str]
    render_ms: float | None
    wall_s: float
    screenshot: Path | None = None
    dom: str = ""
    stderr_errors: list[str] = field(default_factory=list)
    #: per drawn figure: id, title and its traces as the browser holds them (name, type,
    #: point count `n`, `sum_x`, horizontal bars' x summed per lane `per_y`, visibility, meta)
    figures: list[dict] = field(default_factory=list)


def instrumented_copy(page: Path, out_dir: Path) -> Path:
    """A copy of `page` with the error collector and the render report injected.

    The copy goes beside the page (so that `plotly.min.js` and `../plotly.min.js` load as
    they would from the page itself); `out_dir` only receives screenshots."""
    text = page.read_text(encoding="utf-8")
    head = text.find("<head>")
    if head < 0:
        raise ValueError(f"{page}: no <head>")
    text = text[: head + 6] + _HEAD + text[head + 6 :]
    end = text.rfind("</body>")
    if end < 0:
        raise ValueError(f"{page}: no </body>")
    text = text[:end] + _TAIL + text[end:]
    out_dir.mkdir(parents=True, exist_ok=True)
    copy = page.parent / f".{page.stem}.instrumented.html"
    copy.write_text(text, encoding="utf-8")
    return copy


def _flags(user_dir: Path) -> list[str]:
    return [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--mute-audio",
        f"--user-data-dir={user_dir}",
        "--enable-logging=stderr",
        "--v=0",
    ]


def render_page(
    page: Path,
    out_dir: Path,
    budget_ms: int = 20000,
    screenshot: bool = True,
    timeout_s: float = 180,
    measure: bool = True,
) -> Rendered:
    """Open `page` (an HTML file) in headless Chromium; count rendered figures, collect errors.

    The check runs under `--virtual-time-budget` (Chromium waits until the page is idle, up
    to the budget, before dumping the DOM). With `measure`, a second load without virtual
    time reads `render_ms`: real time from navigation start until every figure was drawn
    (the page's inline scripts, including each `Plotly.newPlot`, have run).
    """
    binary = find_chromium()
    if binary is None:
        raise FileNotFoundError("no chromium binary found")
    page = Path(page).resolve()
    out_dir = Path(out_dir)
    copy = instrumented_copy(page, out_dir)
    expected = -1
    m = re.search(
        r"<meta name='clustersim-figures' content='(\d+)'>", page.read_text(encoding="utf-8")[:200000]
    )
    if m:
        expected = int(m.group(1))

    def run(ud: Path, *extra: str) -> tuple[subprocess.CompletedProcess, float]:
        t = time.perf_counter()
        proc = subprocess.run(
            [binary, *_flags(ud), *extra, copy.as_uri()],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        return proc, time.perf_counter() - t

    with tempfile.TemporaryDirectory(prefix="chromium-") as ud:
        proc, wall = run(Path(ud) / "dom", f"--virtual-time-budget={budget_ms}", "--dump-dom")
        render_ms = None
        if measure:
            timed, _ = run(Path(ud) / "timed", "--dump-dom")
            rep = _REPORT.search(timed.stdout)
            if rep is not None:
                import html as _html

                render_ms = float(json.loads(_html.unescape(rep.group(1)))["sync_ms"])
        shot = None
        if screenshot:
            shot = out_dir / f"{page.stem}.png"
            run(
                Path(ud) / "shot",
                f"--virtual-time-budget={budget_ms}",
                "--window-size=1400,4000",
                f"--screenshot={shot}",
            )
            shot = shot if shot.is_file() else None
    copy.unlink(missing_ok=True)
    dom = proc.stdout
    rep = _REPORT.search(dom)
    js_console = [
        ln for ln in proc.stderr.splitlines() if "CONSOLE" in ln and ("Uncaught" in ln or "Error" in ln)
    ]
    if rep is None:
        return Rendered(
            expected,
            0,
            0,
            [
                f"no render report in the DOM (chromium exit {proc.returncode})",
                *proc.stderr.splitlines()[-5:],
            ],
            render_ms,
            wall,
            shot,
            dom,
            js_console,
        )
    import html as _html

    data = json.loads(_html.unescape(rep.group(1)))
    errors = list(data["errors"])
    if not data.get("final") and int(data["rendered"]) < int(data["plots"]):
        errors.append("figures did not finish drawing within the virtual time budget")
    return Rendered(
        expected,
        int(data["plots"]),
        int(data["rendered"]),
        errors,
        render_ms,
        wall,
        shot,
        dom,
        js_console,
        list(data.get("figures", [])),
    )
