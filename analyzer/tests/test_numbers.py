"""The one number formatter's pieces the web UI and the replay's prose use: a column's
values kept as numbers in its unit with a d3 specifier that writes them as the terminal
does, plain numbers, and the replay model's latencies and bandwidths (never `1.5e+03 ms`)."""

from __future__ import annotations

import math

import pytest

from mpiscope import numbers
from mpiscope.analysis.simulate.model import format_rate, format_time
from mpiscope.render import whatif


@pytest.mark.parametrize("s, text", [
    (1.5, "1.5 s"), (8.23e-05, "82.3 µs"), (1170e-6, "1.17 ms"), (0.0, "0 s"),
    (5e-5, "50 µs"), (2e-9, "2 ns"), (0.0009997, "1 ms")])
def test_format_time_reads_as_prose(s, text):
    assert format_time(s) == text


@pytest.mark.parametrize("bps, text", [
    (12.5e6, "12.5 MB/s (100 Mbit/s)"), (999.7e6, "1 GB/s (8 Gbit/s)"),
    (100.0, "100 B/s (800 bit/s)")])
def test_format_rate_has_no_exponent(bps, text):
    assert format_rate(bps) == text


@pytest.mark.parametrize("values", [[0.000399, 0.000001], [-0.831, 0.7607, 0.0],
                                    [1234.5, 0.5], [4.2e-8, 1e-9]])
def test_a_column_value_written_with_its_d3_specifier_is_its_cell(values):
    col = numbers.Column.of(values)
    for x in values:
        # Python's format mini-language reads d3's specifier alike (d3 writes U+2212)
        shown = format(col.value(x), col.d3()).replace("-", numbers.MINUS)
        assert shown == col.cell(x), x


def test_a_column_keeps_values_unrounded_in_its_unit():
    col = numbers.Column.of([0.000399, 0.0000012])
    assert col.header("time") == "time (µs)" and col.d3() == ".1f"
    assert col.value(0.0000012) == pytest.approx(1.2)
    assert numbers.Column.of([-0.831, 0.7607]).d3() == ".1f"
    rate = numbers.Column.of([2.5e8, 1e6], "B/s", lowest=0)
    assert (rate.header("bandwidth"), rate.value(1e6)) == ("bandwidth (MB/s)", 1.0)


@pytest.mark.parametrize("x, text", [
    (0.0000123, "0.0000123"), (2.5, "2.5"), (-1234567, "−1234567"), (0, "0"),
    (math.nan, "–")])
def test_plain_numbers_never_in_scientific_notation(x, text):
    assert numbers.number(x) == text


def test_whatif_scenario_values_in_units():
    assert whatif._item("latency_s", 1e-05) == "latency_s 10 µs"
    assert whatif._item("bandwidth_Bps", 1.25e9) == "bandwidth_Bps 1.25 GB/s"
    assert whatif._item("cpu_factor", 0.5) == "cpu_factor 0.5"
