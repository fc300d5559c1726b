"""The safety net: a callback that fails anyway costs one log line and no update, never a
500 or a traceback (the input checks are meant to make it unnecessary)."""

from __future__ import annotations

import json

import pytest

from mpiscope_webui.app import create_app

DETAILS = {
    "output": '{"panel":["MATCH"],"type":"details"}.children',
    "outputs": {"id": {"panel": 0, "type": "details"}, "property": "children"},
    "inputs": [{"id": {"panel": 0, "type": "timeline"}, "property": "clickData",
                "value": None}],
    "state": [], "changedPropIds": ['{"panel":0,"type":"timeline"}.clickData']}


@pytest.fixture(scope="module")
def app(himeno_traces):
    return create_app([himeno_traces["unpatched"]], analyze_now=True)


def post(app, body) -> tuple[int, bytes]:
    client = app.server.test_client()
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    r = client.post("/_dash-update-component", data=raw, content_type="application/json")
    return r.status_code, r.data


def test_a_failing_callback_is_no_update_and_one_line(app, capfd, monkeypatch):
    assert post(app, DETAILS)[0] == 200  # the real one works
    capfd.readouterr()

    def boom(*_a, **_k):
        raise RuntimeError("boom\nsecond line " + "x" * 500)

    monkeypatch.setattr(app.controller, "details", boom)
    status, body = post(app, DETAILS)
    err = capfd.readouterr().err
    assert status == 204 and body == b""
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("mpiscope: callback error (answered with no update)")
    assert "RuntimeError: boom second line" in lines[0] and len(lines[0]) < 400
    assert "Traceback" not in err


@pytest.mark.parametrize("body", [{"output": "nope"}, {**DETAILS, "inputs": 5},
                                  {**DETAILS, "outputs": "x"}, b"{"])
def test_a_request_dash_cannot_read_is_400_and_one_line(app, capfd, body):
    capfd.readouterr()
    status, text = post(app, body)
    err = capfd.readouterr().err
    assert 400 <= status < 500, (status, text[:200])
    assert "Traceback" not in err and len([x for x in err.splitlines() if x.strip()]) <= 1
