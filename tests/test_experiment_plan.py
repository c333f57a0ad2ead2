"""Experiment files: validation with located errors, sweep expansion, seeds,
endpoint selection from the seed, node settings."""

from __future__ import annotations

import pytest

from conftest import range_links
from meshemu.errors import ConfigError
from meshemu.experiment.plan import load_experiment
from meshemu.experiment.runs import short_name

LINKS = range_links(250.0)
CC = ["reno", "cubic", "bbr"]

CHAIN = """\
topology:
  generate: {kind: chain, n: 8, spacing: 200m}
duration: 20s
warmup: 2s
"""


def plan(write, text: str, **kwargs):
    return load_experiment(write("exp.yaml", text), links=LINKS, **kwargs) if "available_cc" in kwargs else \
        _plan(write("exp.yaml", text), **kwargs)


def _plan(path, overrides=(), scale=None):
    from meshemu.experiment.plan import plan_experiment
    from meshemu.source import load_yaml

    return plan_experiment(load_yaml(path), overrides=list(overrides), scale=scale, links=LINKS, available_cc=CC)


def problems(write, text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        _plan(write("exp.yaml", text))
    return [str(problem) for problem in caught.value.problems]


def test_a_tcp_flow_resolves_with_hops_ports_and_settings(write):
    p = _plan(write("exp.yaml", CHAIN + """\
traffic:
  - {kind: tcp, src: n0, dst: n3, cc: reno, mss: 1000B, window: 64KiB, sack: false, delayed_ack: off}
  - {kind: udp, name: cbr, src: n7, dst: n5, rate: 800KB/s, packet: 1460B, start: 5s, stop: 15s}
sysctl: {net.ipv4.tcp_ecn: 1}
"""))
    assert len(p.runs) == 1
    run = p.runs[0]
    tcp, udp = run.flows
    assert (tcp.name, tcp.src, tcp.dst, tcp.hops, tcp.port) == ("f0", "n0", "n3", 3, 5201)
    assert tcp.options == {"cc": "reno", "mss": 1000, "window": 65536, "sack": False, "delayed_ack": False}
    assert (udp.name, udp.hops, udp.port, udp.start_ns, udp.stop_ns) == ("cbr", 2, 5202, 5_000_000_000, 15_000_000_000)
    assert udp.options == {"rate_bps": 6_400_000, "packet": 1460, "tool": "meshemu-udp"}
    assert tcp.stop_ns == 20_000_000_000  # the run's end
    # SACK is per node: both ends of the TCP flow; ECN on every node.
    assert run.sysctl["n0"] == {"net.ipv4.tcp_ecn": "1", "net.ipv4.tcp_sack": "0"}
    assert run.sysctl["n4"] == {"net.ipv4.tcp_ecn": "1"}
    assert run.routes_quickack == ("n3",)


def test_run_ids_are_stable_and_differ_between_runs(write):
    text = CHAIN + "seeds: [1, 2]\ntraffic:\n  - {kind: udp, src: n0, dst: n1, rate: 1Mbps, packet: 1000B}\n"
    first = [run.run_id for run in _plan(write("a.yaml", text)).runs]
    again = [run.run_id for run in _plan(write("b.yaml", text)).runs]
    assert first == again and len(set(first)) == 2


def test_a_view_recording_is_in_the_measure_only_when_asked_for(write):
    text = CHAIN + "traffic:\n  - {kind: udp, src: n0, dst: n1, rate: 1Mbps, packet: 1000B}\n"
    [plain] = _plan(write("a.yaml", text)).runs
    [recorded] = _plan(write("b.yaml", text + "measure: {view: 500ms}\n")).runs
    # Runs planned before the recording existed keep their ids.
    assert "view" not in plain.measure and recorded.measure["view"] == 500_000_000
    assert plain.run_id != recorded.run_id
    assert any("measure.view" in problem for problem in problems(write, text + "measure: {view: 0s}\n"))


def test_arp_is_in_the_config_only_when_not_the_kernels(write):
    text = CHAIN + "traffic:\n  - {kind: udp, src: n0, dst: n1, rate: 1Mbps, packet: 1000B}\n"
    [plain] = _plan(write("a.yaml", text)).runs
    [once] = _plan(write("b.yaml", text.replace("topology:\n", "topology:\n  arp: resolve_once\n"))).runs
    # Runs planned before the setting existed keep their ids; the record says what ran.
    assert "arp" not in plain.config and once.config["arp"] == "resolve_once"
    assert plain.run_id != once.run_id


def test_sweep_is_a_cartesian_product_and_a_multi_path_entry_sets_each_path(write):
    p = _plan(write("exp.yaml", CHAIN + """\
repetitions: 2
traffic:
  - {kind: tcp, name: tcp, src: n0, dst: n7}
  - {kind: udp, name: udp, src: n0, dst: n7, rate: 1Mbps, packet: 1000B}
sweep:
  traffic.0.dst,traffic.1.dst: [n1, n4]
  traffic.0.cc: [reno, cubic, bbr]
"""))
    assert len(p.runs) == 2 * 3 * 2
    assert [run.seed for run in p.runs[:2]] == [1, 2]
    first = p.runs[0]
    assert first.params == {"traffic.0.dst,traffic.1.dst": "n1", "traffic.0.cc": "reno"}
    assert [(f.dst, f.hops) for f in first.flows] == [("n1", 1), ("n1", 1)]
    assert [run.flows[0].options["cc"] for run in p.runs[:6:2]] == ["reno", "cubic", "bbr"]
    assert p.runs[6].flows[1].dst == "n4"
    assert short_name("traffic.0.dst,traffic.1.dst", p.sweep_paths) == "dst"
    assert p.runs[0].label() == "dst=n1 cc=reno seed=1"


def test_random_and_farthest_endpoints_come_from_the_seed(write):
    text = CHAIN + """\
seeds: [1, 2, 3, 4, 5, 6]
traffic:
  - {kind: udp, src: random, dst: random, rate: 1Mbps, packet: 1000B}
  - {kind: udp, pair: farthest, rate: 1Mbps, packet: 1000B}
  - {kind: udp, src: n3, dst: random, rate: 1Mbps, packet: 1000B}
"""
    runs = _plan(write("a.yaml", text)).runs
    again = _plan(write("b.yaml", text)).runs
    pairs = [(run.flows[0].src, run.flows[0].dst) for run in runs]
    assert pairs == [(run.flows[0].src, run.flows[0].dst) for run in again]
    assert len(set(pairs)) > 1 and all(src != dst for src, dst in pairs)
    for run in runs:
        farthest = run.flows[1]
        assert {farthest.src, farthest.dst} == {"n0", "n7"} and farthest.hops == 7
        assert run.flows[2].src == "n3" and run.flows[2].dst != "n3"


def test_src_all_makes_a_flow_from_every_other_node_on_ports_no_other_entry_uses(write):
    run = _plan(write("exp.yaml", CHAIN.replace("n: 8", "n: 4") + """\
traffic:
  - {kind: udp, name: sat, src: all, dst: n1, rate: 1Mbps, packet: 100B}
  - {kind: tcp, src: n3, dst: n1}
""")).runs[0]
    *group, tcp = run.flows
    assert [(f.name, f.src, f.dst, f.hops, f.group) for f in group] == [
        ("sat-n0", "n0", "n1", 1, "sat"), ("sat-n2", "n2", "n1", 1, "sat"), ("sat-n3", "n3", "n1", 2, "sat")]
    assert [f.port for f in group] == [5201, 5203, 5205] and tcp.port == 5202 and tcp.group is None
    assert all(f.options == {"rate_bps": 1_000_000, "packet": 100, "tool": "meshemu-udp"} for f in group)
    assert "group" in group[0].as_json() and "group" not in tcp.as_json()


def test_src_all_needs_one_destination_and_its_flow_names_stay_unique(write):
    found = "\n".join(problems(write, CHAIN + """\
traffic:
  - {kind: udp, src: all, dst: random, rate: 1Mbps, packet: 100B}
  - {kind: udp, src: n0, dst: all, rate: 1Mbps, packet: 100B}
"""))
    assert "traffic[0]: src: all needs one dst (a node name, first or last)" in found
    assert "traffic[1]: dst cannot be all" in found
    found = "\n".join(problems(write, CHAIN + """\
traffic:
  - {kind: udp, name: x-n2, src: n2, dst: n1, rate: 1Mbps, packet: 100B}
  - {kind: udp, name: x, src: all, dst: n0, rate: 1Mbps, packet: 100B}
  - {kind: udp, src: all, dst: n9, rate: 1Mbps, packet: 100B}
"""))
    assert "traffic[1].name: flow name 'x-n2' (src: all) is used by traffic[0] too" in found
    assert "traffic[2].dst: unknown node 'n9'" in found


def test_schema_errors_name_file_line_and_path(write):
    text = "\n".join(problems(write, CHAIN + """\
traffic:
  - {kind: udp, src: n0, dst: n1, rate: 1Mbps, packet: 2000B}
  - {kind: udp, src: n0, dst: n1, rate: 1Mbps, packet: 100B, strat: 1s}
  - {kind: ftp, src: n0, dst: n1}
  - {kind: udp, pair: random, src: n0, rate: 1Mbps, packet: 100B}
sysctl: {kernel.hostname: x}
"""))
    assert "exp.yaml:6:5: traffic[0]: packet must be 28 to 1472 B" in text
    assert "exp.yaml:7:" in text and "traffic[1].strat: unknown key 'strat' (did you mean 'start'?)" in text
    assert "exp.yaml:8:" in text and "traffic[2]" in text
    assert "exp.yaml:9:5: traffic[3]: give src and dst, or pair, not both" in text
    assert "sysctl: bad sysctl 'kernel.hostname': only net.* settings" in text


def test_resolution_errors_name_file_line_and_path(write):
    found = "\n".join(problems(write, CHAIN + """\
traffic:
  - {kind: tcp, src: n0, dst: n9, cc: vegas}
  - {kind: tcp, src: n0, dst: n2, start: 1500ms}
  - {kind: udp, src: n0, dst: n1, rate: 1Mbps, packet: 100B, start: 25s}
  - {kind: tcp, src: n0, dst: n1, sack: true}
  - {kind: tcp, src: n1, dst: n2, sack: false}
  - {kind: command, node: n12, argv: [sleep, "1"]}
  - {kind: udp, src: n3, dst: n3, rate: 1Mbps, packet: 100B}
"""))
    assert "exp.yaml:6:" in found and "traffic[0].dst: unknown node 'n9'" in found
    assert "traffic[0].cc: congestion control 'vegas' is not available in this kernel; " \
           "net.ipv4.tcp_available_congestion_control: reno cubic bbr" in found
    assert "traffic[1]: an iperf3 flow lasts whole seconds (iperf3 -t), not 18.5 s" in found
    assert "traffic[2].start: starts after the run ends" in found
    assert "traffic[4].sack: sack is a setting of the node (net.ipv4.tcp_sack): flow f3 sets it otherwise on n1" \
        in found
    assert "traffic[5].node: unknown node 'n12'" in found
    assert "traffic[6]: src and dst are the same node (n3)" in found


def test_a_bad_swept_value_is_reported_at_its_sweep_entry(write):
    found = "\n".join(problems(write, CHAIN + """\
traffic:
  - {kind: udp, src: n0, dst: n1, rate: 1Mbps, packet: 100B}
sweep:
  traffic.0.rate: [1Mbps, fast]
"""))
    assert "exp.yaml:8:" in found and "sweep.traffic.0.rate[1]: bad rate 'fast'" in found


def test_unreachable_destination_under_static_routing_is_an_error(write):
    found = "\n".join(problems(write, """\
topology:
  nodes: {a: {position: [0, 0]}, b: {position: [1000m, 0]}}
duration: 10s
traffic:
  - {kind: udp, src: a, dst: b, rate: 1Mbps, packet: 100B}
"""))
    assert "b cannot be reached from a at time 0" in found


def test_overrides_apply_before_validation(write):
    path = write("exp.yaml", CHAIN + "traffic:\n  - {kind: udp, src: n0, dst: n1, rate: 1Mbps, packet: 100B}\n")
    p = _plan(path, overrides=["duration=30s", "traffic.0.dst=n2"])
    assert p.runs[0].duration_ns == 30_000_000_000 and p.runs[0].flows[0].dst == "n2"
    with pytest.raises(ConfigError) as caught:
        _plan(path, overrides=["duration=soon"])
    assert "--set duration" in str(caught.value)


def test_set_reaches_a_sweep_key_that_is_a_dotted_path_itself(write):
    path = write("exp.yaml", CHAIN + "traffic:\n  - {kind: udp, src: n0, dst: n1, rate: 1Mbps, packet: 100B}\n"
                 "sweep:\n  traffic.0.rate: [1Mbps, 2Mbps]\n")
    assert [run.flows[0].options["rate_bps"] for run in _plan(path).runs] == [1_000_000, 2_000_000]
    narrowed = _plan(path, overrides=["sweep.traffic.0.rate=[3Mbps]"])
    assert [run.flows[0].options["rate_bps"] for run in narrowed.runs] == [3_000_000]


SCALED = CHAIN + """\
traffic:
  - {kind: udp, src: n0, dst: n1, rate: 1Mbps, packet: 100B}
seeds: [1]
scales:
  full: {seeds: [1, 2, 3], duration: 900s}
  broken: {traffic.0.dst: n99}
"""


def test_a_scale_applies_its_values_before_overrides_and_is_not_part_of_the_run(write):
    path = write("exp.yaml", SCALED)
    default = _plan(path)
    assert [run.seed for run in default.runs] == [1] and default.runs[0].duration_ns == 20_000_000_000
    full = _plan(path, scale="full", overrides=["duration=600s"])
    assert [run.seed for run in full.runs] == [1, 2, 3]
    assert {run.duration_ns for run in full.runs} == {600_000_000_000}
    # A scale changes the run ids only through what it changes.
    assert full.runs[0].run_id != default.runs[0].run_id
    assert _plan(path, scale="full", overrides=["duration=20s"]).runs[0].run_id == default.runs[0].run_id


def test_a_bad_scale_is_an_error_at_its_line_and_an_unknown_one_lists_the_known(write):
    path = write("exp.yaml", SCALED)
    with pytest.raises(ConfigError) as caught:
        _plan(path, scale="broken")
    assert "exp.yaml:10:" in str(caught.value) and "n99" in str(caught.value)
    with pytest.raises(ConfigError) as caught:
        _plan(path, scale="paper")
    assert "no scale 'paper'" in str(caught.value) and "broken, full" in str(caught.value)


def test_delayed_acks_off_under_aodv_is_the_daemons_job_and_babeld_cannot(write):
    tcp = "traffic:\n  - {kind: tcp, src: n0, dst: n3, cc: reno, delayed_ack: off}\n"
    static = _plan(write("exp.yaml", CHAIN + tcp)).runs[0]
    assert static.routes_quickack == ("n3",) and "routing_daemon" not in static.config
    aodv = _plan(write("exp.yaml", CHAIN.replace("spacing: 200m}", "spacing: 200m}\n  routing: aodv") + tcp)).runs[0]
    # aodvd marks every route it installs; the runner must not rewrite a daemon's routes.
    assert aodv.routes_quickack == ()
    assert aodv.topology.routing_choice.options == {"quickack": True}
    assert aodv.config["routing_daemon"] == {"name": "aodv", "options": {"quickack": True}}
    with pytest.raises(ConfigError) as caught:
        _plan(write("exp.yaml", CHAIN.replace("spacing: 200m}", "spacing: 200m}\n  routing: babeld") + tcp))
    assert "exp.yaml:3:" in str(caught.value) and "babeld installs its routes without it" in str(caught.value)


def test_min_rto_and_timestamps_set_the_nodes_and_flows_must_agree_on_them(write):
    run = _plan(write("exp.yaml", CHAIN + """\
traffic:
  - {kind: tcp, name: a, src: n0, dst: n3, min_rto: 1s, timestamps: false}
  - {kind: tcp, name: b, src: n1, dst: n3}
""")).runs[0]
    a, b = run.flows
    assert a.options["min_rto"] == 1_000_000_000 and a.options["timestamps"] is False
    assert "min_rto" not in b.options and "timestamps" not in b.options  # unset: the run keeps its id
    assert run.sysctl["n0"] == {"net.ipv4.tcp_rto_min_us": "1000000", "net.ipv4.tcp_timestamps": "0"}
    assert run.sysctl["n3"] == {"net.ipv4.tcp_timestamps": "0"} and "n1" not in run.sysctl
    found = "\n".join(problems(write, CHAIN + """\
traffic:
  - {kind: tcp, name: a, src: n0, dst: n3, min_rto: 1s}
  - {kind: tcp, name: b, src: n0, dst: n4, min_rto: 300ms}
  - {kind: tcp, name: c, src: n1, dst: n4, min_rto: 10ns}
"""))
    assert "traffic[1].min_rto: min_rto is a setting of the node (net.ipv4.tcp_rto_min_us): flow a sets it " \
           "otherwise on n0" in found
    assert "traffic[2].min_rto: at least 1 us" in found


def test_the_windows_edges_are_their_own_snapshots_beside_the_interval_ones(write, tmp_path):
    """The record's counters span warm-up end to end, read at `edge`
    snapshots; `stats_interval` adds others, which must not stand in for an
    edge even when one falls a second before it."""
    import threading

    from meshemu.experiment.execute import Execution, Tools

    [run] = plan(write, CHAIN.replace("warmup: 2s", "warmup: 5s\nmeasure: {stats_interval: 1s}") + """\
traffic:
  - {kind: udp, src: n0, dst: n1, rate: 100kbps, packet: 500B}
""").runs
    schedule = Execution(run, "x", tmp_path, Tools(), threading.Event())._schedule()
    snapshots = [(when // 10**9, action) for when, action, _ in schedule if action in ("snapshot", "edge")]
    assert [when for when, action in snapshots if action == "edge"] == [5, 20]
    assert [when for when, action in snapshots if action == "snapshot"] == [s for s in range(1, 20) if s != 5]
