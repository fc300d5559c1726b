"""Fixtures shared by every test directory (tests sit beside what they test)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from mpiscope_testing.browser import available as chromium_available
from mpiscope_testing.browser import chromium

ROOT = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def himeno() -> Path:
    """The Himeno binary, built if needed."""
    subprocess.run(["make", "-C", str(ROOT / "workloads" / "himeno")], check=True,
                   capture_output=True)
    return ROOT / "workloads" / "himeno" / "himeno"


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory):
    """Headless Chromium (mpiscope_testing.browser), one per test module: a module's
    window resizes and cookies never leak into the next."""
    if not chromium_available():
        pytest.skip("chromium/chromedriver not installed (make setup installs them)")
    driver = chromium(tmp_path_factory.mktemp("chromium"))
    yield driver
    driver.quit()
