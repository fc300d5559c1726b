"""`mpiscope whatif`'s terminal summary: measured, replayed, predicted, per rank."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from mpiscope import numbers
from mpiscope.analysis.simulate import Replay
from mpiscope.render.term import name


def _s(x: float) -> str:
    return f"{x:.4f} s"


def _item(key: str, value: object) -> str:
    if value is True:
        return key
    if isinstance(value, list):
        return f"{key} {', '.join(map(str, value))}"
    if isinstance(value, float):  # latencies in seconds, bandwidths in B/s, factors
        text = (numbers.seconds(value) if key.endswith("_s") else numbers.rate(value)
                if key.endswith("_Bps") else numbers.number(value, 4))
        return f"{key} {text}"
    return f"{key} {value}"


def print_summary(r: Replay, console: Console) -> None:
    m = r.machine
    console.print(f"Measured runtime  {_s(r.measured_s)}", highlight=False)
    console.print(f"Replayed          {_s(r.replayed_s)}  ({r.error:+.2%} against measured, "
                  "on the machine fitted from the trace)", highlight=False)
    console.print(f"Fitted machine    {r.fitted.describe()}", highlight=False, markup=False)
    if r.scenario.is_baseline:
        return
    console.print("Scenario          " + "; ".join(
        _item(k, v) for k, v in r.scenario.to_dict().items()
        if v not in (None, [], False)), highlight=False, markup=False)
    gain = r.replayed_s - r.predicted_s
    console.print(f"Predicted         {_s(r.predicted_s)}  (gain {gain:+.4f} s, "
                  f"{gain / r.replayed_s:+.1%} of the replay) on {name(m.name)}",
                  highlight=False)
    own = r.to_dict()["own_time"]
    noise = "kept" if own["noise_kept"] else "dropped (--noise drop)"
    console.print(f"Predicted machine {m.describe()}; MPI calls' own time: overhead "
                  f"{own['overhead_s']:.4f} s, noise {own['noise_s']:.4f} s {noise}",
                  highlight=False, markup=False)
    t = Table("rank", "replayed", "predicted", "predicted MPI", "predicted compute",
              title="Per rank", title_justify="left")
    for row in r.ranks.itertuples():
        t.add_row(str(row.rank), _s(row.replayed_total_s), _s(row.predicted_total_s),
                  _s(row.predicted_mpi_s), _s(row.predicted_compute_s))
    console.print(t)
