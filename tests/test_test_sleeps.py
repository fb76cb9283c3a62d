"""A test that waits in real time says why (issue 25 item 7): the tests run on FakeClock (tests/clock.py) wherever
the code under test takes a clock, so a real `time.sleep` or `asyncio.sleep` is the exception, kept only where a
real process, server or socket moves on its own time, and each one names that reason in a comment on its line or
in the comment just above it. An auditor found two polling loops without one (issue 25 audit, 2026-12-07); this
keeps the next one from slipping in."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
# A call to the real clock's sleep: `time.sleep(` or `asyncio.sleep(`, not FakeClock's `clock.sleep(`.
REAL_SLEEP = re.compile(r"\b(?:time|asyncio)\.sleep\(")
# `asyncio.sleep(0)` only yields to the event loop: it waits for nothing.
YIELD_ONLY = re.compile(r"\basyncio\.sleep\(0\)")


def sleeps_without_a_reason(text: str) -> list[int]:
    """Line numbers (1-based) of real sleeps with no comment on their line or in the comment lines right above."""
    lines = text.splitlines()
    missing = []
    for i, line in enumerate(lines):
        code = line.split("#", 1)[0]
        if not REAL_SLEEP.search(code) or YIELD_ONLY.search(code):
            continue
        if "#" in line and line.split("#", 1)[1].strip():
            continue
        above = i - 1
        while above >= 0 and lines[above].strip().startswith("#"):
            above -= 1
        if above < i - 1:  # a comment block ends right above the call
            continue
        missing.append(i + 1)
    return missing


def test_the_checker_finds_a_bare_sleep_and_accepts_a_commented_one() -> None:
    bare = "while True:\n    time.sleep(0.05)\n"
    said = "while True:\n    time.sleep(0.05)  # real sleep: polling a real server\n"
    above = "# Real sleep: the child holds the lock until killed.\nawait asyncio.sleep(30)\n"
    fake = "clock.sleep(5)\nawait asyncio.sleep(0)\n"
    assert sleeps_without_a_reason(bare) == [2]
    assert sleeps_without_a_reason(said) == []
    assert sleeps_without_a_reason(above) == []
    assert sleeps_without_a_reason(fake) == []
    # A comment two lines up, with code between, does not count for the call.
    assert sleeps_without_a_reason("# about x\nx = 1\ntime.sleep(1)\n") == [3]


def test_every_real_sleep_in_the_tests_says_why() -> None:
    # This file is left out: its samples above are strings that only look like sleeps.
    found = {str(p.relative_to(TESTS)): bad for p in sorted(TESTS.rglob("*.py")) if p != Path(__file__).resolve()
             if (bad := sleeps_without_a_reason(p.read_text(encoding="utf-8")))}
    assert not found, f"real sleeps without a comment saying why (use FakeClock, or say what real thing moves): {found}"
