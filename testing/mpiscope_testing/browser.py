"""The headless Chromium every browser test and benchmark drives: Debian's chromium and
chromedriver through Selenium (no downloads, no background traffic).

    if available():
        driver = chromium(tmp_path / "profile")
        driver.get(url)
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        driver.quit()

The root conftest.py wraps it as the `browser` fixture (one per test module).
"""

from __future__ import annotations

import shutil
from pathlib import Path

WINDOW = (1500, 1300)  # the web UI's screenshots (docs/timeline.png) are taken at this size
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run")


def available() -> bool:
    return bool(shutil.which("chromium") and shutil.which("chromedriver"))


def chromium(profile: Path, script_timeout: float = 30):
    """A new headless Chromium with its profile in `profile` and the page's console log
    kept (`driver.get_log("browser")`); the caller quits it."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium")
    for flag in (*FLAGS, f"--window-size={WINDOW[0]},{WINDOW[1]}",
                 f"--user-data-dir={profile}"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)
    driver.set_script_timeout(script_timeout)
    return driver
