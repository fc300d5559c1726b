"""docker-compose.yml and Dockerfile, checked structurally (no Docker engine on our machines)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_compose_has_study_and_webui_sharing_a_results_volume():
    spec = compose()
    services = spec["services"]
    assert set(services) >= {"study", "webui"}
    assert "results" in spec["volumes"]
    study, webui = services["study"], services["webui"]
    assert study["build"] == "."
    assert any(v.startswith("results:/results") for v in study["volumes"])
    assert any(v.startswith("results:/results") for v in webui["volumes"])
    assert study["command"][:3] == ["mpiscope", "study", "himeno"]
    out = study["command"][study["command"].index("--out") + 1]
    assert out == "/results"


def test_webui_serves_the_studys_4_rank_pair_on_port_8050_bound_to_loopback():
    spec = compose()
    webui = spec["services"]["webui"]
    cmd = webui["command"]
    assert cmd[:2] == ["mpiscope", "serve"]
    assert cmd[2:4] == ["/results/himeno-4-unpatched", "/results/himeno-4-patched"]
    assert cmd[cmd.index("--port") + 1] == "8050"
    assert webui["ports"] == ["127.0.0.1:8050:8050"]
    assert webui["depends_on"]["study"]["condition"] == "service_completed_successfully"
    # the image the webui runs is the one the study service builds
    assert webui["image"] == spec["services"]["study"]["image"]


def test_study_writes_the_directories_the_webui_serves():
    from mpiscope.jobs.study import run_dir_name

    assert run_dir_name(4, "unpatched") == "himeno-4-unpatched"
    assert run_dir_name(4, "patched") == "himeno-4-patched"


def test_dockerfile_builds_with_the_projects_own_setup_and_build():
    text = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM debian:bookworm", text, re.M)
    logical = re.sub(r"\\\n\s*", " ", text).splitlines()  # join continuation lines
    runs = [" ".join(line[4:].split()) for line in logical if line.startswith("RUN ")]
    assert "make setup" in runs and "make build" in runs
    # the bootstrap packages are only what scripts/setup.sh needs to start (make, python3)
    bootstrap = next(r for r in runs if r.startswith("apt-get"))
    packages = bootstrap.split("--no-install-recommends", 1)[1].split("&&")[0].split()
    assert set(packages) <= {"make", "python3", "python3-pip", "ca-certificates"}
    assert "make setup" in (ROOT / "Makefile").read_text()
    assert "COPY . ." in text
