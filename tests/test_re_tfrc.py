"""The RE-TFRC study (issue 7): TFRC flow metrics over the measurement
window, by hand; the study's experiment files plan; and a short chain in a
real lab where RE-TFRC keeps the RTT below TFRC's without giving up
throughput."""

from __future__ import annotations

import pytest

from meshemu.experiment import metrics


def interval(start: float, sending: float, x: float, throughput: float) -> dict:
    return {"start_s": start, "end_s": start + 1.0, "sending_rate_bps": sending, "rate_bps": x, "x_bps": x,
            "throughput_bps": throughput, "rtt_ms": None, "loss_event_rate": 0.0}


def feedback(t: float, rtt_ms: float, p: float) -> dict:
    return {"t": t, "event": "feedback", "rtt_sample_ms": rtt_ms, "rtt_ms": rtt_ms, "p": p, "x_recv_bps": 0.0,
            "x_bps": 0.0, "rate_bps": 0.0, "slow_start": False, "data_limited": False}


def test_tfrc_metrics_cover_the_window_and_leave_slow_start_out():
    # Slow start overshoots in [0, 2 s): 900 kbit/s sent, RTT 3 s; the window is [2 s, 4 s].
    sender = {"role": "sender", "sending_rate_bps": 500_000.0,
              "intervals": [interval(0, 900e3, 1e6, 100e3), interval(1, 900e3, 1e6, 300e3),
                            interval(2, 300e3, 320e3, 280e3), interval(3, 200e3, 240e3, 200e3),
                            interval(4, 0.0, 240e3, 50e3)]}
    trace = [feedback(1.5, 3000.0, 0.0), {"t": 2.5, "event": "nofeedback", "x_bps": 1.0, "rate_bps": 1.0},
             feedback(2.2, 100.0, 0.01), feedback(3.9, 300.0, 0.03), feedback(4.5, 50.0, 0.05)]
    receiver = [{"role": "receiver", "packets": 120, "loss_fraction": 0.2, "jitter_ms": 3.0,
                 "one_way_delay_ms": {"count": 120, "min": 40.0, "mean": 90.0, "max": 900.0}}]
    found = metrics.tfrc_metrics(receiver, sender, trace, (2.0, 4.0))
    assert found["goodput_bps"] == pytest.approx(240e3)
    assert found["sending_rate_bps"] == pytest.approx(250e3)
    assert found["allowed_rate_bps"] == pytest.approx(280e3)
    assert found["rtt_ms"]["mean"] == pytest.approx(200.0)
    assert (found["rtt_ms"]["min"], found["rtt_ms"]["max"]) == (100.0, 300.0)
    assert found["loss_event_rate"] == pytest.approx(0.02)
    assert found["feedback"] == 2
    # Whole flow, from the receiver.
    assert (found["loss"], found["packets_received"], found["jitter_ms"]) == (0.2, 120, 3.0)


def test_tfrc_metrics_name_what_is_missing():
    assert "no summary" in metrics.tfrc_metrics([], None, [], (0.0, 10.0))["error"]
    sender = {"intervals": [interval(0, 1.0, 1.0, 1.0)]}
    found = metrics.tfrc_metrics([], sender, [], (5.0, 10.0))
    assert "no interval inside the window 5-10 s" in found["error"]
    # No feedback in the window: no RTT and no loss event rate, not zeros.
    quiet = metrics.tfrc_metrics([], sender, [], (0.0, 1.0))
    assert quiet["rtt_ms"] is None and quiet["loss_event_rate"] is None and quiet["loss"] is None
