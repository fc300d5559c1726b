"""Fixtures shared by every test directory (tests sit beside what they test)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def himeno() -> Path:
    """The Himeno binary, built if needed."""
    subprocess.run(["make", "-C", str(ROOT / "workloads" / "himeno")], check=True,
                   capture_output=True)
    return ROOT / "workloads" / "himeno" / "himeno"


@pytest.fixture(scope="session")
def chromium():
    """Debian's headless Chromium driven by Selenium (no downloads, no background traffic)."""
    import shutil
    import tempfile

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        pytest.skip("chromium/chromedriver not installed (make setup installs them)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium")
    profile = tempfile.mkdtemp(prefix="mpiscope-chromium-")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--window-size=1400,1000",
                 f"--user-data-dir={profile}"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)
