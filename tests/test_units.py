"""Quantities with units, as users write them."""

import math

import pytest

from meshemu import units


@pytest.mark.parametrize("text, metres", [("200m", 200.0), ("1.5km", 1500.0), ("0m", 0.0), ("-3m", -3.0),
                                          ("2e3m", 2000.0), (" 12 m ", 12.0)])
def test_lengths(text, metres):
    assert units.LENGTH.parse(text) == pytest.approx(metres)


@pytest.mark.parametrize("text, ns", [("20us", 20_000), ("10ms", 10_000_000), ("1.5s", 1_500_000_000),
                                      ("7ns", 7), ("9µs", 9_000)])
def test_times(text, ns):
    assert units.TIME.parse(text) == pytest.approx(ns)


@pytest.mark.parametrize("text, bps", [("2Mbps", 2e6), ("5.5Mbps", 5.5e6), ("1Gbps", 1e9), ("64kbps", 64e3),
                                       ("1000B/s", 8000.0), ("2KB/s", 16000.0), ("1MB/s", 8e6)])
def test_rates(text, bps):
    assert units.RATE.parse(text) == pytest.approx(bps)


@pytest.mark.parametrize("text, size", [("1460B", 1460), ("2KB", 2000), ("2KiB", 2048)])
def test_sizes(text, size):
    assert units.SIZE.parse(text) == size


def test_powers_convert_to_dbm():
    assert units.POWER.parse("20dBm") == 20.0
    assert units.POWER.parse("100mW") == pytest.approx(20.0)
    assert units.POWER.parse("1W") == pytest.approx(30.0)
    # ns-2's WaveLAN thresholds and power
    assert units.POWER.parse("3.652e-10W") == pytest.approx(-64.3747, abs=1e-4)
    assert units.POWER.parse("1.559e-11W") == pytest.approx(-78.0715, abs=1e-4)
    assert units.POWER.parse("0.28183815W") == pytest.approx(24.5, abs=1e-5)


def test_other_quantities():
    assert units.FREQUENCY.parse("914MHz") == 914e6
    assert units.FREQUENCY.parse("2.437GHz") == pytest.approx(2.437e9)
    assert units.SPEED.parse("36km/h") == pytest.approx(10.0)
    assert units.GAIN.parse("3dBi") == 3.0
    assert units.DECIBEL.parse("10dB") == 10.0


@pytest.mark.parametrize("quantity, value, fragment", [
    (units.LENGTH, 200, "missing unit"),
    (units.LENGTH, "200", "missing unit"),
    (units.LENGTH, "200mi", "unknown unit 'mi' for a length; use one of: m, km"),
    (units.TIME, "10 sec", "unknown unit 'sec'"),
    (units.RATE, "fast", "bad rate 'fast'"),
    (units.POWER, "0W", "must be positive"),
    (units.POWER, True, "expected a power"),
    (units.SIZE, [1], "expected a size"),
    (units.LENGTH, "1e999m", "not a finite number"),
])
def test_mistakes_are_explained(quantity, value, fragment):
    with pytest.raises(ValueError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        quantity.parse(value)


def test_whole_numbers():
    assert units.whole(1000.0000000001, "x") == 1000
    with pytest.raises(ValueError, match="whole number"):
        units.whole(1.5, "a time in ns")


def test_coordinates_accept_bare_metres():
    assert units.coordinate(12) == 12.0
    assert units.coordinate("1km") == 1000.0
    with pytest.raises(ValueError):
        units.coordinate(math.inf)
