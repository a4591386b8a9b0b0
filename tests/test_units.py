"""Units: parsing, formatting, and round trips."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clustersim import units
from clustersim.errors import UnitError
from clustersim.units import Dimension


@pytest.mark.parametrize(
    ("text", "dimension", "expected"),
    [
        ("80GiB", Dimension.BYTES, 80 * 2**30),
        ("80 GiB", Dimension.BYTES, 80 * 2**30),
        ("3.84TB", Dimension.BYTES, 3.84e12),
        ("1.2 TiB", Dimension.BYTES, 1.2 * 2**40),
        ("4 KB", Dimension.BYTES, 4000),
        ("4KiB", Dimension.BYTES, 4096),
        ("1PiB", Dimension.BYTES, 2**50),
        ("3.35TB/s", Dimension.BYTES_PER_S, 3.35e12),
        ("820GiB/s", Dimension.BYTES_PER_S, 820 * 2**30),
        ("200MBps", Dimension.BYTES_PER_S, 200e6),
        ("400Gbps", Dimension.BITS_PER_S, 400e9),
        ("3.2Tbps", Dimension.BITS_PER_S, 3.2e12),
        ("200 Gb/s", Dimension.BITS_PER_S, 200e9),
        ("989.4TFLOPS", Dimension.FLOP_PER_S, 989.4e12),
        ("2.25 PFLOPS", Dimension.FLOP_PER_S, 2.25e15),
        ("1978.9TOPS", Dimension.FLOP_PER_S, 1978.9e12),
        ("15T", Dimension.COUNT, 15e12),
        ("4M", Dimension.COUNT, 4e6),
        ("1.5B", Dimension.COUNT, 1.5e9),
        ("1,024", Dimension.COUNT, 1024),
        ("20us", Dimension.SECONDS, 20e-6),
        ("1.5h", Dimension.SECONDS, 5400),
        ("3d", Dimension.SECONDS, 259200),
        ("90", Dimension.SECONDS, 90),
        ("700W", Dimension.WATTS, 700),
        ("1.2kW", Dimension.WATTS, 1200),
        (42, Dimension.BYTES, 42),
    ],
)
def test_parse_known_spellings(text, dimension, expected):
    assert units.parse(text, dimension) == pytest.approx(expected, rel=1e-12)


def test_bits_and_bytes_are_not_confused():
    assert units.parse_bits_per_s("400Gbps") == 400e9
    assert units.parse_bytes_per_s("400GBps") == 400e9
    with pytest.raises(UnitError, match="Gbps"):
        units.parse_bytes_per_s("400Gbps")
    with pytest.raises(UnitError, match="GB/s"):
        units.parse_bits_per_s("50GB/s")


@pytest.mark.parametrize("text", ["", "GiB", "12 parsecs", "1..2GB", "nan", "inf GB", "1e999GB"])
def test_bad_input_names_text_and_dimension(text):
    with pytest.raises(UnitError) as info:
        units.parse_bytes(text)
    assert repr(text) in str(info.value)
    assert "bytes" in str(info.value)


def test_boolean_is_not_a_quantity():
    with pytest.raises(UnitError):
        units.parse(True, Dimension.COUNT)


def test_format_examples():
    assert units.format_bytes(80 * 2**30) == "80 GiB"
    assert units.format_bytes(3.84e12, binary=False) == "3.84 TB"
    assert units.format_bits_per_s(3.2e12) == "3.2 Tbps"
    assert units.format_bytes_per_s(3.35e12) == "3.35 TB/s"
    assert units.format_flop_per_s(989.4e12) == "989.4 TFLOPS"
    assert units.format_count(15e12) == "15T"
    assert units.format_seconds(20e-6) == "20 us"
    assert units.format_seconds(5400) == "1.5 h"


positive = st.floats(min_value=1e-6, max_value=1e20, allow_nan=False, allow_infinity=False)


@given(value=positive, dimension=st.sampled_from(list(Dimension)), binary=st.booleans())
def test_format_then_parse_round_trips(value, dimension, binary):
    text = units.format_quantity(value, dimension, digits=15, binary=binary)
    assert math.isclose(units.parse(text, dimension), value, rel_tol=1e-12)


@given(value=positive, dimension=st.sampled_from(list(Dimension)))
def test_default_format_is_within_display_precision(value, dimension):
    text = units.format_quantity(value, dimension)
    assert math.isclose(units.parse(text, dimension), value, rel_tol=5e-4)


@given(text=st.text(max_size=30), dimension=st.sampled_from(list(Dimension)))
def test_parse_never_crashes_on_arbitrary_text(text, dimension):
    try:
        value = units.parse(text, dimension)
    except UnitError:
        return
    assert math.isfinite(value)
