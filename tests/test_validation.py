"""The medium model validated in virtual time (issue 2), the way a user would:
`meshemu sim experiments/validation/X.yaml --json`, one JSON object per run.

1. Bianchi (2000) saturation throughput, with the analytic model written here,
   independently of the simulator, from the standard's frame sizes and timings.
2. Hidden terminals, 3. spatial reuse and exposed terminals, 4. capture,
5. throughput of 1-8-hop chains (Li et al. 2001), 6. determinism.
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from collections import defaultdict
from functools import cache
from pathlib import Path
from typing import Any

import pytest

VALIDATION = Path(__file__).resolve().parent.parent / "experiments" / "validation"
SPEED_OF_LIGHT = 299_792_458.0


def meshemu_sim(name: str, *options: str) -> list[dict[str, Any]]:
    result = subprocess.run([sys.executable, "-m", "meshemu", "sim", str(VALIDATION / name), *options],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"meshemu sim {name} failed:\n{result.stderr}"
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


@cache
def runs(name: str) -> tuple[dict[str, Any], ...]:
    return tuple(meshemu_sim(name, "--json"))


@cache
def scenarios(name: str) -> tuple[dict[str, Any], ...]:
    """The resolved scenarios (the simulator's input) of every run."""
    return tuple(line["scenario"] for line in meshemu_sim(name, "--dry-run"))


def total_bps(run: dict[str, Any]) -> float:
    return sum(flow["throughput_bps"] for flow in run["flows"])


def by_params(name: str) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for run in runs(name):
        groups[json.dumps(run["params"], sort_keys=True)].append(run)
    return groups


def node(run: dict[str, Any], name: str) -> dict[str, Any]:
    return next(n for n in run["nodes"] if n["name"] == name)


# --- 1. Bianchi ---------------------------------------------------------------------------
#
# Bianchi's Markov chain gives tau, the probability that a station transmits in
# a generic slot, and p, the probability that its transmission collides:
#     tau = 2(1 - 2p) / ((1 - 2p)(W + 1) + p W (1 - (2p)^m)),  p = 1 - (1 - tau)^(n - 1)
# with W = CWmin + 1 and 2^m W = CWmax + 1; the saturation throughput is
#     S = Ps Ptr E[P] / ((1 - Ptr) slot + Ptr Ps Ts + Ptr (1 - Ps) Tc).
# Ts and Tc are the times the medium is seen busy (plus the IFS that follows)
# for a success and a collision, derived from what the simulator does:
#  - success, basic access: DATA, SIFS, ACK, then DIFS before anyone counts
#    down again; the receiver answers after DATA has propagated to it and the
#    others resume after the ACK has propagated back: two propagation delays.
#  - success, RTS/CTS: RTS, SIFS, CTS, SIFS, DATA, SIFS, ACK, DIFS and four
#    propagation delays.
#  - collision: the stations that did not transmit sensed frames they could not
#    decode, so they wait EIFS = SIFS + ACK(basic rate) + DIFS after the longest
#    colliding frame (DATA, or RTS with RTS/CTS) plus one propagation delay.
#    The colliding stations themselves resume earlier: after their ACK/CTS
#    timeout (SIFS + slot + PHY-RX-START delay = 222 us) and DIFS, i.e. 92 us
#    (4.6 slots) before the others. The model's symmetric chain ignores that
#    head start, which makes the simulator slightly faster than the model when
#    collisions are frequent (about +2% at n = 50, basic access), within the
#    tolerance the issue sets.
# Airtime: long preamble 144 us + PLCP header 48 us at 1 Mbit/s, then the
# MPDU at the frame's rate; a data MPDU is 24 (MAC header) + 8 (LLC/SNAP) +
# L + 4 (FCS) bytes; RTS 20 bytes, CTS and ACK 14, control frames at the basic
# rate.


def dsss_airtime_s(mpdu_bytes: int, rate_bps: float) -> float:
    return 192e-6 + mpdu_bytes * 8 / rate_bps


def bianchi_tau(n: int, w: int, m: int) -> float:
    def excess(tau: float) -> float:
        p = 1 - (1 - tau) ** (n - 1)
        return 2 * (1 - 2 * p) / ((1 - 2 * p) * (w + 1) + p * w * (1 - (2 * p) ** m)) - tau

    low, high = 1e-12, 1.0  # excess > 0 at low, < 0 at high: bisect
    for _ in range(200):
        mid = (low + high) / 2
        low, high = (mid, high) if excess(mid) > 0 else (low, mid)
    return (low + high) / 2


def bianchi_throughput_bps(n: int, rts_cts: bool, radio: dict[str, Any], packet_bytes: int,
                           distance_m: float) -> float:
    slot, sifs = radio["slot_ns"] * 1e-9, radio["sifs_ns"] * 1e-9
    difs = sifs + 2 * slot
    basic, data_rate = radio["basic_rate_bps"], radio["data_rate_bps"]
    data = dsss_airtime_s(24 + 8 + packet_bytes + 4, data_rate)
    ack = dsss_airtime_s(14, basic)
    cts = dsss_airtime_s(14, basic)
    rts = dsss_airtime_s(20, basic)
    eifs = sifs + ack + difs
    delta = distance_m / SPEED_OF_LIGHT
    if rts_cts:
        ts = rts + sifs + cts + sifs + data + sifs + ack + difs + 4 * delta
        tc = rts + eifs + delta
    else:
        ts = data + sifs + ack + difs + 2 * delta
        tc = data + eifs + delta
    w = radio["cw_min"] + 1
    m = round(math.log2((radio["cw_max"] + 1) / w))
    tau = bianchi_tau(n, w, m)
    p_tr = 1 - (1 - tau) ** n
    p_s = n * tau * (1 - tau) ** (n - 1) / p_tr
    return p_s * p_tr * packet_bytes * 8 / ((1 - p_tr) * slot + p_tr * p_s * ts + p_tr * (1 - p_s) * tc)


def test_bianchi_model_sanity() -> None:
    """The analytic side on its own: one station never collides."""
    radio = {"slot_ns": 20000, "sifs_ns": 10000, "basic_rate_bps": 1e6, "data_rate_bps": 2e6,
             "cw_min": 31, "cw_max": 1023}
    # Payload over DATA + SIFS + ACK + DIFS + CWmin/2 slots.
    cycle = 6176e-6 + 10e-6 + 304e-6 + 50e-6 + 15.5 * 20e-6
    assert bianchi_throughput_bps(1, False, radio, 1460, 0.0) == pytest.approx(11680 / cycle, rel=1e-9)
    assert bianchi_tau(10, 32, 5) < bianchi_tau(2, 32, 5) < 2 / 33 + 1e-12


@pytest.mark.slow
def test_bianchi_saturation_throughput() -> None:
    table = []
    checked = 0
    for group in by_params("bianchi.yaml").values():
        params = group[0]["params"]
        n = params["topology.generate.n"]
        rts_cts = params["topology.radio.rts_threshold"] == "0B"
        scenario = next(s for s in scenarios("bianchi.yaml") if len(s["medium"]["nodes"]) == n + 1
                        and (s["medium"]["nodes"][1]["radio"]["rts_threshold_bytes"] == 0) == rts_cts)
        radio = scenario["medium"]["nodes"][1]["radio"]
        packet = scenario["flows"][0]["packet_bytes"]
        assert len(scenario["flows"]) == n and all(f["traffic"]["kind"] == "saturated" for f in scenario["flows"])
        assert (scenario["duration_ns"] - scenario["warmup_ns"]) * len(group) >= 300e9, "run long enough"
        simulated = statistics.mean(total_bps(run) for run in group)
        analytic = bianchi_throughput_bps(n, rts_cts, radio, packet, distance_m=10.0)
        error = (simulated - analytic) / analytic
        table.append(f"n={n:2d} {'RTS/CTS' if rts_cts else 'basic  '} simulated {simulated / 1e6:.4f} "
                     f"analytic {analytic / 1e6:.4f} Mbit/s error {error * 100:+.2f}%")
        tolerance = 0.02 if n <= 10 else 0.05
        assert abs(error) <= tolerance, "\n".join(table)
        checked += 1
    print("\n".join(sorted(table)))
    assert checked == 12


# --- 2. hidden terminals ----------------------------------------------------------------

def test_hidden_terminals_collapse_without_rts_and_recover_with_it() -> None:
    groups = {g[0]["params"]["topology.radio.rts_threshold"]: g for g in by_params("hidden-terminal.yaml").values()}
    basic, rts = groups["3000B"], groups["0B"]
    single_hop_basic = bianchi_throughput_bps(1, False, {"slot_ns": 20000, "sifs_ns": 10000, "basic_rate_bps": 1e6,
                                                         "data_rate_bps": 2e6, "cw_min": 31, "cw_max": 1023},
                                              1460, 240.0)
    for run in basic:
        receiver = node(run, "n0")
        # Most of the channel is lost: under a fifth of one sender's capacity.
        assert total_bps(run) < 0.2 * single_hop_basic, total_bps(run)
        # Collisions dominate: several lost receptions per delivered frame.
        assert receiver["rx_collisions"] > 3 * receiver["rx_frames"], receiver
        assert sum(node(run, s)["retry_drops"] for s in ("n1", "n2")) > 400
    for run in rts:
        receiver = node(run, "n0")
        assert total_bps(run) > 0.85 * 1.55e6, total_bps(run)
        assert total_bps(run) > 4 * max(total_bps(b) for b in basic)
        assert receiver["rx_collisions"] < 0.25 * receiver["rx_frames"], receiver
        assert min(f["throughput_bps"] for f in run["flows"]) > 0.3 * total_bps(run), "both senders get through"


# --- 3. spatial reuse and exposed terminals ---------------------------------------------

def test_far_pairs_reuse_space_and_exposed_pairs_share() -> None:
    groups = list(by_params("exposed-terminal.yaml").values())
    far = [g for g in groups if g[0]["params"]["topology.nodes"]["s2"]["position"][0] == "1500m"][0]
    exposed = [g for g in groups if g[0]["params"]["topology.nodes"]["s2"]["position"][0] == "300m"][0]
    # Single-hop RTS/CTS saturation throughput of one pair (1.55 Mbit/s).
    single = bianchi_throughput_bps(1, True, {"slot_ns": 20000, "sifs_ns": 10000, "basic_rate_bps": 1e6,
                                              "data_rate_bps": 2e6, "cw_min": 31, "cw_max": 1023}, 1460, 200.0)
    for run in far:
        for flow in run["flows"]:
            assert flow["throughput_bps"] == pytest.approx(single, rel=0.02)
        assert node(run, "s1")["defers"] == 0, "the far pair is never heard"
    for run in exposed:
        assert total_bps(run) == pytest.approx(single, rel=0.05)
        for flow in run["flows"]:
            assert 0.4 * single < flow["throughput_bps"] < 0.6 * single
        assert node(run, "s1")["defers"] > 500


# --- 4. capture --------------------------------------------------------------------------

def test_stronger_frame_captures_receiver_only_above_threshold() -> None:
    groups = {g[0]["params"]["topology.nodes.n1.position"][0]: g for g in by_params("capture.yaml").values()}
    single_basic = 1.705e6
    for run in groups["-50m"]:
        strong, weak = run["flows"]
        # 50 m vs 240 m: SINR far above 10 dB; every overlap goes to n1.
        assert strong["throughput_bps"] == pytest.approx(single_basic, rel=0.01)
        assert weak["throughput_bps"] < 0.02 * single_basic
        # n2's frames are lost under n1's (n0 stays on, or switches to, the
        # stronger frame): nearly every attempt of n2 ends in an ACK timeout.
        n2 = node(run, "n2")
        assert n2["ack_timeouts"] > 0.95 * n2["data_attempts"], n2
    for run in groups["-200m"]:
        # 200 m vs 240 m: SINR about 3 dB; overlapping frames are both lost.
        assert total_bps(run) < 0.2 * single_basic
        for flow in run["flows"]:
            assert flow["throughput_bps"] < 0.15 * single_basic
        assert node(run, "n0")["rx_collisions"] > 3 * node(run, "n0")["rx_frames"]


# --- 5. chains ---------------------------------------------------------------------------

def test_chain_throughput_falls_with_hops_and_flattens() -> None:
    by_hops: dict[int, float] = {}
    for group in by_params("chain-sim.yaml").values():
        hops = group[0]["flows"][0]["hops"]
        assert hops == group[0]["params"]["topology.generate.n"] - 1
        by_hops[hops] = statistics.mean(run["flows"][0]["throughput_bps"] for run in group)
    print("\nhops  throughput (Mbit/s)  fraction of 1 hop")
    for hops, bps in sorted(by_hops.items()):
        print(f"{hops:4d}  {bps / 1e6:19.3f}  {bps / by_hops[1]:17.3f}")
    assert sorted(by_hops) == list(range(1, 9))
    # Up to 5 hops each hop costs throughput; from there the chain is on its
    # plateau, where neighbouring hop counts may swap by a few per cent (7
    # hops 4 % above 6 with ns-2's interference floor; ns-2's own chains of
    # 5 and 6 hops: experiments/validation/ns2/README.md).
    for hops in range(2, 6):
        assert by_hops[hops] <= by_hops[hops - 1] * 1.03, f"{hops} hops faster than {hops - 1}"
    assert by_hops[2] == pytest.approx(by_hops[1] / 2, rel=0.05)
    long = [by_hops[h] for h in (5, 6, 7, 8)]
    assert max(long) <= 1.15 * min(long), "long chains flatten"
    # ns2-wavelan reproduces ns-2.35's MAC (eifs_nav etc.), whose long chains
    # run at about 1/7 of one hop (0.22-0.23 Mbit/s at 5-6 hops in ns-2.35
    # itself: experiments/validation/ns2/README.md); 1/8 leaves room for seeds.
    for bps in long:
        assert by_hops[1] / 8 <= bps <= by_hops[1] / 4


# --- 6. determinism ----------------------------------------------------------------------

def test_same_seed_same_trace_digest_other_seed_other_digest() -> None:
    first = meshemu_sim("hidden-terminal.yaml", "--json")
    second = meshemu_sim("hidden-terminal.yaml", "--json")
    key = lambda run: (json.dumps(run["params"], sort_keys=True), run["seed"])  # noqa: E731
    assert {key(r): r["trace_digest"] for r in first} == {key(r): r["trace_digest"] for r in second}
    assert [r["flows"] for r in first] == [r["flows"] for r in second]
    digests = [r["trace_digest"] for r in first]
    assert len(set(digests)) == len(digests), "every seed (and sweep point) has its own trace"
