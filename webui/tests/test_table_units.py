"""The web UI's tables (windowstats.shown, as every DataTable gets its rows and columns):
each time or bandwidth column in one unit its header names, the cells numbers in that
unit (the table sorts by value) written with fixed decimals, never an SI suffix per cell
or an exponent; columns that measure parts of one thing share a unit."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from mpiscope_webui import compare, windowstats


def by_id(columns: list[dict]) -> dict[str, dict]:
    return {c["id"]: c for c in columns}


def test_a_time_column_has_one_unit_named_in_its_header():
    df = pd.DataFrame({"name": ["MPI_Send", "MPI_Recv"], "calls": [12000, 3],
                       "time_s": [0.000399, 0.000001], "bytes": [40650000, 8],
                       "mean_s": [2e-6, 3e-7], "max_s": [9e-6, 4e-7]})
    data, columns = windowstats.shown(df)
    col = by_id(columns)
    assert col["time_s"]["name"] == "time (µs)"
    assert col["time_s"]["format"] == {"specifier": ".1f"}  # 399.0, 1.0: no "399µ", "1µ"
    assert np.allclose([r["time_s"] for r in data], [399.0, 1.0])
    # statistics of the same calls share a unit: mean and max both in µs
    assert col["mean_s"]["name"] == "mean (µs)" and col["max_s"]["name"] == "max (µs)"
    assert col["calls"]["format"] == {"specifier": ",d"}
    assert col["bytes"]["name"] == "data (B)" and col["bytes"]["format"] == {"specifier": ",d"}
    assert "type" not in col["name"]  # text


def test_breakdown_parts_share_a_unit_and_unmeasured_columns_go():
    df = pd.DataFrame({"rank": [0, 1], "host": ["a", "b"], "total_s": [1.2, 1.3],
                       "compute_s": [0.9, 1.0], "communication_s": [0.0003, 0.2],
                       "descheduled_s": [math.nan, math.nan]})
    data, columns = windowstats.shown(df)
    col = by_id(columns)
    assert {col[k]["name"].rsplit(" ", 1)[1] for k in ("total_s", "compute_s",
                                                      "communication_s")} == {"(s)"}
    assert "descheduled_s" not in col  # nothing measured: no column of blanks
    # the 300 µs part does not read 0.000 beside the 1.3 s total: one more decimal
    assert col["communication_s"]["format"] == {"specifier": ".4f"}
    assert f"{data[0]['communication_s']:.4f}" == "0.0003"
    assert col["rank"]["format"] == {"specifier": "d"}


def test_compare_differences_in_one_unit():
    df = pd.DataFrame({"part": ["compute", "wall"], "A_s": [0.831, 0.9],
                       "B_s": [0.0007607, 0.5], "delta_s": [-0.8302393, -0.4],
                       "delta_pct": [-99.9, -44.4]})
    _, columns = windowstats.shown(df, compare.DIFF_LABELS, compare.DIFF_UNITS)
    col = by_id(columns)
    assert [col[k]["name"] for k in ("A_s", "B_s", "delta_s")] == ["A (ms)", "B (ms)",
                                                                  "Δ B − A (ms)"]
    assert col["delta_s"]["format"] == {"specifier": ".1f"}
    assert col["delta_pct"]["format"] == {"specifier": ".1f"}


def test_bandwidth_and_unknown_numbers_never_in_scientific_notation():
    df = pd.DataFrame({"bandwidth_MBps": [250.0, 4000.0], "ratio": [1.5e-7, 2.0],
                       "extra_s": [1e-6, 2e-6]})
    data, columns = windowstats.shown(df)
    col = by_id(columns)
    assert col["bandwidth_MBps"]["name"] == "bandwidth (GB/s)"
    assert [r["bandwidth_MBps"] for r in data] == [0.25, 4.0]
    assert col["ratio"]["format"] == {"specifier": ".4~r"}  # decimal, never 1.5e-7
    assert col["extra_s"]["name"] == "extra (µs)"
