"""Headless Chromium for the `web` family: one browser (Selenium + chromedriver) and a bounded pool.

A `Browser` is one chromedriver process and the Chromium it starts, kept on a MiniWoB++ page and
reused across episodes (a new episode of the task it shows costs a script call, not a page load;
another task costs one page load). `BrowserPool` holds at most ``size`` of them: an episode takes
one at its start and gives it back when it ends or is closed, so open episodes beyond ``size``
wait (`BusyError` after ``wait_s``). `Browser.quit` ends chromedriver and every Chromium process it
started (the pids are read from /proc at start and killed if still alive after WebDriver's quit),
so thousands of episodes leave no processes behind (measured in bench/web_env.md).

The page clock: MiniWoB ends an episode after ``core.EPISODE_MAX_TIME`` ms of wall time (10 s) with
reward -1, and scales a win by the time left. `Browser.begin` sets that limit to `PAGE_CLOCK_MS`
(about 24 days, the longest browser timer), so a slow policy is not failed by the page's clock: the
family's step budget ends the episode, and the reward read is the raw one (no time scaling).
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import threading
import time
import weakref
from pathlib import Path
from typing import Any

from services.common.errors import BusyError, RLAnythingError
from services.env.families.web_page import DISTRACTOR_CLASS

__all__ = ["BrowserMissingError", "find_browser", "Browser", "BrowserPool", "PAGE_CLOCK_MS", "VIEWPORT", "descendants",
           "miniwob_pages"]

VIEWPORT = (500, 300)
"""The page's viewport in CSS pixels (device pixel ratio 1): MiniWoB's task (160x210 at the top left)
fits, and a screenshot is this size. Set through DevTools, since headless Chromium's window size
includes the browser's own bars (``--window-size=400,300`` left a 500x157 viewport, measured)."""
PAGE_CLOCK_MS = 2**31 - 1
"""The page's episode time limit during an episode (ms; the largest setTimeout delay browsers honour)."""

_BEGIN_JS = """
var seed = arguments[0], minText = arguments[1], kind = arguments[2], n = arguments[3], words = arguments[4],
    mark = arguments[6];
if (core.EP_TIMER !== null) { core.endEpisode(0); }
document.querySelectorAll('.' + mark).forEach(function (e) { e.remove(); });
// nothing of the episode before may show in this one: focus, a text selection, the scroll position
if (document.activeElement && document.activeElement !== document.body) { document.activeElement.blur(); }
if (window.getSelection) { window.getSelection().removeAllRanges(); }
window.scrollTo(0, 0);
core.EPISODE_MAX_TIME = arguments[5];
var draws = 0;
for (;;) {
  Math.seedrandom(seed + '/' + draws);
  core.setDataMode('train');
  core.startEpisodeReal();
  draws++;
  var q = core.getUtterance().match(/"[^"]*"/g) || [];
  var shortest = q.length ? Math.min.apply(null, q.map(function (s) { return s.length - 2; })) : 1e9;
  if (shortest >= minText || draws >= 200) break;
}
var utt = core.getUtterance().toLowerCase();
var pool = words.filter(function (w) { return utt.indexOf(w) < 0; });
var area = document.getElementById('area');
for (var i = 0; i < n; i++) {
  var w = pool[Math.floor(Math.random() * pool.length)], el, c;
  if (kind === 'button') { el = document.createElement('button'); el.textContent = w; }
  else if (kind === 'link') { el = document.createElement('span'); el.className = 'alink'; el.textContent = w; }
  else if (kind === 'checkbox') {
    el = document.createElement('label'); c = document.createElement('input'); c.type = 'checkbox';
    el.appendChild(c); el.appendChild(document.createTextNode(w));
  } else { el = document.createElement('input'); el.type = 'text'; el.style.width = '60px'; }
  el.classList.add(mark);  // getDOMInfo reports it; the next episode removes it
  var kids = area.children, at = Math.floor(Math.random() * (kids.length + 1));
  area.insertBefore(el, at < kids.length ? kids[at] : null);
}
return draws;
"""
_SNAPSHOT_JS = """
return {utterance: core.getUtterance(), dom: WOB_DONE_GLOBAL ? null : core.getDOMInfo(), done: WOB_DONE_GLOBAL,
        raw: WOB_RAW_REWARD_GLOBAL, reason: WOB_REWARD_REASON === undefined ? null : String(WOB_REWARD_REASON)};
"""
_CLICK_JS = """
var el = core.previousDOMInfo[arguments[0]];
if (!el) { return 'no element with ref ' + arguments[0] + ' on the page'; }
var r = core.elementClick(arguments[0]);
return r === true ? '' : String(r);
"""
_TYPE_JS = """
var el = core.previousDOMInfo[arguments[0]];
if (!el) { return 'no element with ref ' + arguments[0] + ' on the page'; }
if (!(el instanceof HTMLTextAreaElement || (el instanceof HTMLInputElement &&
      ['text', 'password', 'email', 'search', 'tel', 'url', 'number'].indexOf(el.type) >= 0))) {
  return 'element ' + arguments[0] + ' is not a text field';
}
el.focus(); el.value = arguments[1];
el.dispatchEvent(new Event('input', {bubbles: true})); el.dispatchEvent(new Event('change', {bubbles: true}));
return '';
"""


class BrowserMissingError(RLAnythingError, RuntimeError):
    """Chromium or chromedriver is not installed (the message says how to install them)."""


def find_browser() -> tuple[str, str]:
    """Paths of Chromium and chromedriver: ``RLA_CHROMIUM`` / ``RLA_CHROMEDRIVER`` if set, else the
    first of chromium, chromium-browser, google-chrome and chromedriver on PATH.

    Raises:
        BrowserMissingError: either is missing.
    """
    chromium = os.environ.get("RLA_CHROMIUM") or next(
        (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
    driver = os.environ.get("RLA_CHROMEDRIVER") or shutil.which("chromedriver")
    missing = [name for name, path in (("chromium", chromium), ("chromedriver", driver)) if not path]
    if missing:
        raise BrowserMissingError(f"the web family needs {' and '.join(missing)}: on Debian/Ubuntu "
                                  "`apt-get install chromium chromium-driver` (or set RLA_CHROMIUM / RLA_CHROMEDRIVER)")
    assert chromium is not None and driver is not None
    return chromium, driver


def miniwob_pages() -> Path:
    """The folder of MiniWoB++'s task pages inside the installed ``miniwob`` package."""
    import miniwob

    return Path(miniwob.__file__).parent / "html" / "miniwob"


def descendants(pid: int) -> list[int]:
    """Pids of every process below ``pid`` (Linux /proc; [] elsewhere or when it has exited)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


class Browser:
    """One headless Chromium driven by chromedriver, showing one MiniWoB++ task page at a time.

    Raises (constructor):
        BrowserMissingError: Chromium or chromedriver is not installed.
    """

    def __init__(self, timeout_s: float = 30.0) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        chromium, driver = find_browser()
        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--disable-extensions", "--no-first-run", "--mute-audio", "--window-size=400,300"):
            options.add_argument(arg)
        self._service = Service(executable_path=driver, log_output=subprocess.DEVNULL)
        self.driver = webdriver.Chrome(service=self._service, options=options)
        self.driver.set_script_timeout(timeout_s)
        self.driver.set_page_load_timeout(timeout_s)
        self.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": VIEWPORT[0], "height": VIEWPORT[1], "deviceScaleFactor": 1, "mobile": False})
        process = self._service.process
        self.driver_pid: int | None = process.pid if process is not None else None
        self.pids = [self.driver_pid, *descendants(self.driver_pid)] if self.driver_pid else []
        """chromedriver and the Chromium processes it started (read once, at start)."""
        self.task: str | None = None
        self.episodes = 0

    def begin(self, task: str, seed: int, min_text: int = 0, distractor_kind: str = "", distractors: int = 0,
              words: tuple[str, ...] = ()) -> int:
        """Start an episode of ``task`` (a MiniWoB page name) whose problem is drawn from ``seed``
        (redrawn until every quoted text is at least ``min_text`` characters, at most 200 draws),
        with ``distractors`` inert elements of ``distractor_kind`` added (class
        `web_page.DISTRACTOR_CLASS`; those of the episode before are removed); returns the draws made.
        The page keeps nothing of the browser's previous episode: focus, selection and scroll are
        reset, and MiniWoB regenerates the task area (its fields and checkboxes) for the new problem."""
        if task != self.task:
            self.driver.get((miniwob_pages() / f"{task}.html").as_uri())
            deadline = time.monotonic() + 10.0
            while not self.driver.execute_script("return typeof core !== 'undefined' && core.cover_div !== null;"):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"MiniWoB page {task!r} did not load in 10 s")
                time.sleep(0.02)
            self.task = task
        self.episodes += 1
        return int(self.driver.execute_script(_BEGIN_JS, f"rla-{seed}", min_text, distractor_kind, distractors,
                                              list(words), PAGE_CLOCK_MS, DISTRACTOR_CLASS))

    def snapshot(self) -> dict[str, Any]:
        """``utterance``, ``dom`` (``core.getDOMInfo()``; None once done), ``done``, ``raw`` (the raw
        reward), ``reason``."""
        return dict(self.driver.execute_script(_SNAPSHOT_JS))

    def set_instruction(self, text: str) -> None:
        """Show ``text`` as the page's instruction (its ``#query``; MiniWoB's reward does not read it)."""
        self.driver.execute_script("document.getElementById('query').textContent = arguments[0];", text)

    def screenshot(self) -> bytes:
        """The page as PNG bytes: the viewport, `VIEWPORT` pixels wide and high."""
        return bytes(self.driver.get_screenshot_as_png())

    def click(self, ref: int) -> str:
        """Click element ``ref`` of the last snapshot; "" or why it could not."""
        return str(self.driver.execute_script(_CLICK_JS, ref))

    def type(self, ref: int, text: str) -> str:
        """Replace the text of field ``ref`` with ``text``; "" or why it could not."""
        return str(self.driver.execute_script(_TYPE_JS, ref, text))

    def quit(self) -> None:
        """End chromedriver and Chromium; kill (SIGKILL) any of their processes still alive after
        WebDriver's quit, and reap chromedriver."""
        try:
            self.driver.quit()
        except Exception:  # noqa: BLE001 - a dead browser is what quit is for
            pass
        deadline = time.monotonic() + 5.0
        for pid in reversed(self.pids):
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if _alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        process = self._service.process
        if process is not None:
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


class BrowserPool:
    """At most ``size`` browsers, reused: `acquire` gives an idle one (preferring one already on the
    asked task) or starts one while fewer than ``size`` run, else waits up to ``wait_s``.

    Thread-safe. Every pool still open at interpreter exit is closed (`atexit`).
    """

    def __init__(self, size: int, wait_s: float = 120.0, factory: Any = Browser) -> None:
        if size < 1:
            raise ValueError(f"browsers must be >= 1, got {size}")
        self.size = size
        self.wait_s = wait_s
        self.factory = factory
        self._idle: list[Any] = []
        self._running = 0
        self._cond = threading.Condition()
        self._closed = False
        self.started_total = 0
        """Browsers started over the pool's life (a crashed one is replaced)."""
        _OPEN_POOLS.add(self)

    @property
    def running(self) -> int:
        """Browsers started and not quit."""
        return self._running

    def acquire(self, task: str = "") -> Any:
        """A browser for one episode.

        Raises:
            BusyError: all ``size`` browsers stayed in use for ``wait_s`` seconds.
            BrowserMissingError: Chromium or chromedriver is not installed.
        """
        deadline = time.monotonic() + self.wait_s
        with self._cond:
            while True:
                if self._closed:
                    raise RuntimeError("the browser pool is closed")
                if self._idle:
                    same = [b for b in self._idle if b.task == task]
                    browser = (same or self._idle)[-1]
                    self._idle.remove(browser)
                    return browser
                if self._running < self.size:
                    self._running += 1
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BusyError(f"all {self.size} browsers of the web family stayed busy for {self.wait_s:g} s "
                                    "(raise env.families[].browsers or close finished sessions)")
                self._cond.wait(left)
        try:
            browser = self.factory()
        except BaseException:
            with self._cond:
                self._running -= 1
                self._cond.notify()
            raise
        self.started_total += 1
        return browser

    def warm(self) -> int:
        """Start browsers until ``size`` run, in parallel, and keep them idle; returns how many started.
        A Reset then takes an idle browser instead of starting one (5.5 s at a load average of 19,
        measured), which a client's deadline may not cover.

        Raises:
            BrowserMissingError: Chromium or chromedriver is not installed.
        """
        with self._cond:
            count = self.size - self._running
            self._running += count
        results: list[Any] = [None] * count

        def start(i: int) -> None:
            try:
                results[i] = self.factory()
            except BaseException as exc:  # noqa: BLE001 - re-raised below, after the other starts
                results[i] = exc

        threads = [threading.Thread(target=start, args=(i,), name=f"browser-start-{i}") for i in range(count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        started = [b for b in results if not isinstance(b, BaseException)]
        failed = [e for e in results if isinstance(e, BaseException)]
        with self._cond:
            self._running -= len(failed)
            self._idle += started
            self.started_total += len(started)
            self._cond.notify_all()
        if failed:
            raise failed[0]
        return len(started)

    def release(self, browser: Any, broken: bool = False) -> None:
        """Give ``browser`` back; a ``broken`` one (a failed call) is quit instead of reused."""
        if broken or self._closed:
            browser.quit()
            with self._cond:
                self._running -= 1
                self._cond.notify()
            return
        with self._cond:
            self._idle.append(browser)
            self._cond.notify()

    def close(self) -> None:
        """Quit every idle browser and refuse new ones; browsers in use are quit when released."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._running -= len(idle)
            self._cond.notify_all()
        for browser in idle:
            browser.quit()
        _OPEN_POOLS.discard(self)


_OPEN_POOLS: weakref.WeakSet[BrowserPool] = weakref.WeakSet()


@atexit.register
def _close_open_pools() -> None:
    for pool in list(_OPEN_POOLS):
        pool.close()
