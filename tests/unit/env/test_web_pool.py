"""The web family's browser pool, with stand-in browsers (the real ones: tests/integration/env/test_web_family.py):
bounded, reused across episodes, quits broken browsers and every idle one on close."""

from __future__ import annotations

import threading
import time

import pytest

from services.common.errors import BusyError
from services.env.families.web_browser import BrowserPool


class StandIn:
    started: list["StandIn"] = []

    def __init__(self) -> None:
        self.task: str | None = None
        self.quit_calls = 0
        StandIn.started.append(self)

    def quit(self) -> None:
        self.quit_calls += 1


@pytest.fixture(autouse=True)
def fresh() -> None:
    StandIn.started = []


def test_episodes_in_turn_reuse_one_browser() -> None:
    pool = BrowserPool(3, factory=StandIn)
    for _ in range(50):
        browser = pool.acquire("click-button")
        pool.release(browser)
    assert len(StandIn.started) == 1 and pool.started_total == 1 and pool.running == 1


def test_an_idle_browser_on_the_asked_task_is_preferred() -> None:
    pool = BrowserPool(2, factory=StandIn)
    a, b = pool.acquire(), pool.acquire()
    a.task, b.task = "click-link", "enter-text"
    pool.release(a)
    pool.release(b)
    assert pool.acquire("click-link") is a


def test_the_bound_holds_and_a_waiter_gets_the_released_browser() -> None:
    pool = BrowserPool(2, wait_s=5.0, factory=StandIn)
    held = [pool.acquire(), pool.acquire()]
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(pool.acquire()))
    waiter.start()
    time.sleep(0.2)
    assert got == [] and pool.running == 2
    pool.release(held[0])
    waiter.join(5)
    assert got == [held[0]] and len(StandIn.started) == 2


def test_a_pool_busy_past_its_wait_says_so() -> None:
    pool = BrowserPool(1, wait_s=0.1, factory=StandIn)
    pool.acquire()
    with pytest.raises(BusyError, match="all 1 browsers of the web family stayed busy for 0.1 s"):
        pool.acquire()


def test_a_broken_browser_is_quit_and_replaced() -> None:
    pool = BrowserPool(1, factory=StandIn)
    first = pool.acquire()
    pool.release(first, broken=True)
    second = pool.acquire()
    assert first.quit_calls == 1 and second is not first and pool.running == 1


def test_close_quits_idle_browsers_and_those_released_later() -> None:
    pool = BrowserPool(2, factory=StandIn)
    idle, busy = pool.acquire(), pool.acquire()
    pool.release(idle)
    pool.close()
    assert idle.quit_calls == 1 and busy.quit_calls == 0
    pool.release(busy)
    assert busy.quit_calls == 1 and pool.running == 0
    with pytest.raises(RuntimeError, match="closed"):
        pool.acquire()


def test_a_failed_start_frees_its_place() -> None:
    def failing() -> StandIn:
        raise OSError("no chromedriver")

    pool = BrowserPool(1, factory=failing)
    with pytest.raises(OSError):
        pool.acquire()
    assert pool.running == 0


def test_warm_starts_every_browser_up_front_and_acquire_takes_them_without_starting_more() -> None:
    pool = BrowserPool(3, factory=StandIn)
    first = pool.acquire()
    assert pool.warm() == 2 and pool.running == 3 and len(StandIn.started) == 3
    got = [pool.acquire(), pool.acquire()]
    assert {id(b) for b in got} == {id(b) for b in StandIn.started[1:]} and id(first) not in {id(b) for b in got}
    assert pool.warm() == 0 and pool.started_total == 3


def test_a_failed_warm_start_frees_its_place_and_keeps_the_others() -> None:
    calls = []

    def flaky() -> StandIn:
        calls.append(1)
        if len(calls) == 2:
            raise OSError("chromedriver did not start")
        return StandIn()

    pool = BrowserPool(3, factory=flaky)
    with pytest.raises(OSError, match="did not start"):
        pool.warm()
    assert pool.running == 2 and pool.started_total == 2
    assert pool.acquire() in StandIn.started


def test_size_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="browsers must be >= 1, got 0"):
        BrowserPool(0)


def test_descendants_lists_a_child_until_it_is_reaped() -> None:
    import os
    import subprocess

    from services.env.families.web_browser import descendants

    child = subprocess.Popen(["sleep", "30"])
    try:
        assert child.pid in descendants(os.getpid())
    finally:
        child.kill()
        child.wait()
    assert child.pid not in descendants(os.getpid())


def test_a_missing_browser_is_named_with_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from services.env.families.web_browser import BrowserMissingError, find_browser

    monkeypatch.setenv("PATH", "")
    monkeypatch.delenv("RLA_CHROMIUM", raising=False)
    monkeypatch.delenv("RLA_CHROMEDRIVER", raising=False)
    with pytest.raises(BrowserMissingError, match="needs chromium and chromedriver: .*apt-get install chromium "
                                                  "chromium-driver"):
        find_browser()
    monkeypatch.setenv("RLA_CHROMIUM", "/opt/chrome")
    with pytest.raises(BrowserMissingError, match="needs chromedriver:"):
        find_browser()
    monkeypatch.setenv("RLA_CHROMEDRIVER", "/opt/chromedriver")
    assert find_browser() == ("/opt/chrome", "/opt/chromedriver")
