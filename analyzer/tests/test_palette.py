"""The one palette: the colours a user tells apart, also with the colour-vision
deficiencies (simulated as Machado et al. 2009 do, severity 1), and never one colour for
two things shown together."""

from __future__ import annotations

import itertools
import math

import pytest

from mpiscope.render import palette

# Machado, Oliveira & Fernandes 2009, severity 1.0, on linear RGB
CVD = {
    "deuteranopia": ((0.367322, 0.860646, -0.227968), (0.280085, 0.672501, 0.047413),
                     (-0.011820, 0.042940, 0.968881)),
    "protanopia": ((0.152286, 1.052583, -0.204868), (0.114503, 0.786281, 0.099216),
                   (-0.003882, -0.048116, 1.051998)),
    "tritanopia": ((1.255528, -0.076749, -0.178779), (-0.078411, 0.930809, 0.147602),
                   (0.004733, 0.691367, 0.303900)),
}


def _linear(c: float) -> float:
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def lab(hex_colour: str, vision: str = "normal") -> tuple[float, float, float]:
    rgb = [_linear(int(hex_colour[i:i + 2], 16) / 255) for i in (1, 3, 5)]
    if vision != "normal":
        rgb = [min(max(sum(m * c for m, c in zip(row, rgb, strict=True)), 0.0), 1.0)
               for row in CVD[vision]]
    x = (0.4124 * rgb[0] + 0.3576 * rgb[1] + 0.1805 * rgb[2]) / 0.95047
    y = 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2]
    z = (0.0193 * rgb[0] + 0.1192 * rgb[1] + 0.9505 * rgb[2]) / 1.08883

    def f(t: float) -> float:
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def delta_e(a: str, b: str, vision: str = "normal") -> float:
    return math.dist(lab(a, vision), lab(b, vision))


# everything a function, a part or the critical path is drawn in
EVERY = [*palette.PART_COLOURS.values(), *palette.FIXED.values(), *palette.POOL,
         palette.COMPUTE, palette.CRITICAL]


def test_every_colour_is_its_own():
    assert len(set(EVERY)) == len(EVERY)
    worst = min(itertools.combinations(EVERY, 2), key=lambda p: delta_e(*p))
    assert delta_e(*worst) >= 12, worst


@pytest.mark.parametrize("vision", sorted(CVD))
def test_every_colour_stays_apart_for_colour_blind_eyes(vision):
    # pool functions are shown beside fixed ones and the parts, the critical path over all
    worst = min(itertools.combinations(EVERY, 2), key=lambda p: delta_e(*p, vision))
    assert delta_e(*worst, vision) >= 10, worst


def test_neutral_series_are_no_function_or_part():
    # a study's variants and the bandwidth line must not read as a function or a part
    assert len(set(palette.NEUTRALS)) == len(palette.NEUTRALS)
    for neutral in palette.NEUTRALS:
        assert neutral not in EVERY
        nearest = min(EVERY, key=lambda c: delta_e(neutral, c))
        assert delta_e(neutral, nearest) >= 12, (neutral, nearest)


def test_functions_shown_together_never_share_a_colour():
    # the collisions: Init/Finalize, Cart_create/Comm_free and the I/O part,
    # Allreduce and synchronization
    shown = ["MPI_Init", "MPI_Finalize", "MPI_Cart_create", "MPI_Comm_free", "MPI_Allreduce",
             "MPI_File_write_all", *(f"MPI_User_{i}" for i in range(40))]
    c = palette.colours(shown)
    assert sorted(c) == sorted(shown) and len(set(c.values())) == len(shown)
    assert not set(c.values()) & set(palette.PART_COLOURS.values()) - {palette.COMPUTE}
    # stable: the same set gets the same colours in any order, fixed ones always theirs
    assert palette.colours(reversed(shown)) == c
    assert c["MPI_Allreduce"] == palette.colour("MPI_Allreduce") == palette.FIXED["MPI_Allreduce"]
