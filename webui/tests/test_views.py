"""The analysis panel's message-size figure marks the eager/rendezvous switch the
analyzer found (mpiscope.analysis.stats.protocol_switches, tested on ping-pong traces in
analyzer/tests/test_protocol_switch.py)."""

import numpy as np
import pandas as pd

from mpiscope.analysis import stats
from mpiscope.render import palette
from mpiscope_webui.analysis import Panels
from mpiscope_webui.views import message_size_figure


def panels(switches: list) -> Panels:
    lo = [2 ** k for k in range(8, 16)]  # 256 B .. 32 KiB
    sizes = pd.DataFrame({"bucket_lo": lo, "bucket_hi": [2 * b - 1 for b in lo],
                          "messages": 3, "bytes": [3 * b for b in lo],
                          "median_transfer_s": 1e-6, "p90_transfer_s": 1e-6,
                          "bandwidth_MBps": np.linspace(100, 900, len(lo))})
    return Panels(pd.DataFrame(), pd.DataFrame(), sizes, pd.DataFrame(), [],
                  protocol_switches=switches)


def test_the_switch_is_a_dashed_line_between_eager_and_rendezvous_sizes():
    sw = stats.ProtocolSwitch(path="intra-node", bytes=16384, last_below_bytes=8192,
                              transfer_s=5e-6, predicted_s=2e-6, alpha_s=1e-6,
                              beta_Bps=5e9, sizes_below=6, sizes_above=2)
    fig = message_size_figure(panels([sw]))
    [line] = fig.layout.shapes
    assert (line.x0, line.x1, line.line.dash) == (5.5, 5.5, "dash")  # 8 KiB | 16 KiB
    [note] = fig.layout.annotations
    assert note.text == "intra-node: eager up to 8 KiB, rendezvous from 16 KiB (2.5x)"


def test_no_switch_no_line():
    fig = message_size_figure(panels([]))
    assert not fig.layout.shapes and not fig.layout.annotations


def test_the_bandwidth_line_is_no_functions_colour():
    # it once took MPI_Allreduce's colour: a line of "MPI_Allreduce" in a figure of sizes
    fig = message_size_figure(panels([]))
    [bandwidth] = [t for t in fig.data if t.name == "bandwidth (MB/s)"]
    assert bandwidth.line.color in palette.NEUTRALS
    assert bandwidth.line.color not in {*palette.PALETTE, *palette.PART_COLOURS.values(),
                                        palette.CRITICAL}


def test_duration_histogram_counts_the_windows_calls(tmp_path):
    """The Functions tab's histogram counts the calls of the window and rank set, as its
    table does: the bars add up to the table's calls, the shortest call included."""
    from mpiscope.archive import reader
    from mpiscope_testing.windowtrace import ALLREDUCES, PHASE_B, SENDS, US, build
    from mpiscope_webui.model import TraceModel
    from mpiscope_webui.views import duration_histogram

    m = TraceModel.build(reader.load(build(tmp_path / "t")))
    whole = duration_histogram(m, "MPI_Send")
    assert sum(whole.data[0].y) == len(SENDS)
    half = m.session.window(50 * US, 320 * US)  # the first five sends (3 .. 7 µs)
    bars = duration_histogram(m, "MPI_Send", half).data[0]
    assert sum(bars.y) == 5 == int(half.functions().set_index("name").loc["MPI_Send", "calls"])
    assert max(x for x, y in zip(bars.x, bars.y, strict=True) if y) < 7.1e-6
    late = m.session.window(PHASE_B, PHASE_B + 10**6, ranks=(2,))
    assert sum(duration_histogram(m, "MPI_Allreduce", late).data[0].y) == ALLREDUCES
    assert not duration_histogram(m, "MPI_Send", late).data  # none in that window
