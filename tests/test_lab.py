"""Labs on the real-time TAP medium (root): the CLI and the Python API."""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import TOPOLOGIES, namespaces
from meshemu import arptable, kernelstats, procs, rundirs
from meshemu.errors import MediumError
from meshemu.lab import Lab
from meshemu.state import BY_NETNS, NETNS_DIR, RUN_ROOT, read_state
from meshemu.topology import load_topology

pytestmark = pytest.mark.root

CHAIN = "tchain7"


def meshemu(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "meshemu", *args], capture_output=True, text=True, timeout=timeout)


def leftovers(lab: str) -> list[str]:
    """Anything of the lab still on the machine."""
    found = [ns for ns in namespaces() if ns.startswith(f"{lab}-")]
    found += [str(path) for path in Path("/etc/netns").glob(f"{lab}-*")] if Path("/etc/netns").exists() else []
    if (RUN_ROOT / lab).exists():
        found.append(str(RUN_ROOT / lab))
    found += [line for line in Path("/proc/self/mountinfo").read_text().splitlines() if f"/{lab}-" in line]
    if BY_NETNS.exists():
        found += [str(link) for link in BY_NETNS.iterdir() if f"/{lab}/" in os.readlink(link)]
    return found


@pytest.fixture(scope="module")
def chain():
    """chain7 up through the CLI, as a user would."""
    up = meshemu("up", str(TOPOLOGIES / "chain7.yaml"), "--name", CHAIN)
    try:
        assert up.returncode == 0, up.stderr
        yield up.stdout
    finally:
        down = meshemu("down", CHAIN)
        meshemu("cleanup", CHAIN)
        assert down.returncode == 0, down.stderr
        assert leftovers(CHAIN) == []


def in_node(node: str, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return meshemu("exec", node, "--lab", CHAIN, "--", *argv, timeout=timeout)


def ping_rtts(node: str, target: str, count: int = 5) -> list[float]:
    result = in_node(node, "ping", "-n", "-c", str(count), "-i", "0.2", "-W", "2", target)
    assert result.returncode == 0, result.stdout + result.stderr
    return [float(rtt) for rtt in re.findall(r"time=([\d.]+) ms", result.stdout)]


def test_up_prints_nodes_addresses_and_neighbours(chain):
    rows = {line.split("│")[1].strip(): line for line in chain.splitlines() if line.count("│") >= 4}
    assert set(f"n{i}" for i in range(8)) <= set(rows)
    assert "10.0.0.4" in rows["n3"] and "(600, 0)" in rows["n3"]
    assert re.search(r"│\s*n2 n4\s*│", rows["n3"])  # 250 m receive range: the next nodes only
    assert re.search(r"│\s*n1\s*│", rows["n0"])


def test_ping_by_name_across_seven_hops(chain):
    result = in_node("n0", "ping", "-c", "3", "-W", "3", "n7")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "10.0.0.8" in result.stdout and "3 received" in result.stdout


def test_rtt_grows_with_hop_count(chain):
    """Each hop costs at least DIFS + RTS + CTS + data + ACK each way at
    2 Mbit/s (about 1.7 ms for a ping): about 3.4 ms of round trip per hop."""
    medians = {}
    for hops in (1, 2, 4, 7):
        rtts = ping_rtts("n0", f"n{hops}")
        assert min(rtts) >= 3.0 * hops, (hops, rtts)
        medians[hops] = statistics.median(rtts)
    assert medians[1] < medians[2] < medians[4] < medians[7], medians


def iperf(client_args: list[str], server: str = "n7", client: str = "n0") -> dict:
    lab = Lab.attach(CHAIN)
    server_process = lab[server].spawn(["iperf3", "-s", "-1", "--bind", lab[server].ip])
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # wait for the server to listen
            listening = lab[server].run(["ss", "-ltn", "sport", "= :5201"]).stdout
            if "5201" in listening:
                break
            time.sleep(0.05)
        result = lab[client].run(["iperf3", "-c", server, "-t", "5", "-J", *client_args], timeout=60)
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr
        return json.loads(result.stdout)
    finally:
        server_process.terminate()
        server_process.wait(timeout=10)


@pytest.mark.parametrize("algorithm", ["cubic", "reno"])
def test_iperf3_tcp_end_to_end(chain, algorithm):
    report = iperf(["-C", algorithm])
    assert report["end"]["sender_tcp_congestion"] == algorithm
    goodput = report["end"]["sum_received"]["bits_per_second"]
    # 7 hops of 2 Mbit/s with RTS/CTS: some tens to a few hundred kbit/s
    assert 20e3 < goodput < 1e6, goodput


def test_iperf3_udp_end_to_end(chain):
    report = iperf(["-u", "-b", "100k", "-l", "1000"])
    received = report["end"]["sum"]
    assert received["packets"] > 0
    assert received["lost_percent"] < 20, received


def test_stats_and_move_through_the_cli(chain):
    ping_rtts("n0", "n1", count=3)
    stats = meshemu("stats", "--lab", CHAIN, "--json")
    assert stats.returncode == 0, stats.stderr
    nodes = json.loads(stats.stdout)
    assert set(nodes) == {f"n{i}" for i in range(8)}
    assert nodes["n0"]["tx_data_frames"] >= 3 and nodes["n0"]["rts_attempts"] >= 3
    assert nodes["n1"]["rx_frames"] >= 3
    table = meshemu("stats", "n1", "--lab", CHAIN)
    assert table.returncode == 0 and "n1" in table.stdout

    moved = meshemu("move", "n1", "200", "5km", "--lab", CHAIN)
    assert moved.returncode == 0, moved.stderr
    assert Lab.attach(CHAIN).positions()["n1"] == [200.0, 5000.0, 0.0]
    assert in_node("n0", "ping", "-c", "2", "-W", "1", "n1").returncode != 0  # out of range
    assert meshemu("move", "n1", "200", "0", "--lab", CHAIN).returncode == 0
    assert in_node("n0", "ping", "-c", "2", "-W", "2", "n1").returncode == 0


def test_a_flush_request_drops_what_a_node_queued_for_a_neighbour(chain):
    """What aodvd's flush_on_break asks (emulator/README.md section 6): with
    n5 out of range, n4's pings to it queue behind frames that fail at the
    retry limit; a flush drops the queued ones, counted as link drops."""
    lab = Lab.attach(CHAIN)
    n5_mac = lab.config["medium"]["nodes"][5]["mac_address"]
    with pytest.raises(MediumError, match="no node has address 02:00:00:00:00:99"):
        lab.control("flush", node="n4", to="02:00:00:00:00:99")
    in_node("n4", "ping", "-c", "1", "-W", "2", "n5")  # the neighbour entry, while n5 is reachable
    assert meshemu("move", "n5", "1000", "5km", "--lab", CHAIN).returncode == 0
    pings = lab["n4"].spawn(["ping", "-q", "-c", "30", "-i", "0.005", "n5"])
    try:
        time.sleep(0.3)  # 30 sent; each frame takes some 40 ms of failing RTSs
        dropped = lab.control("flush", node="n4", to=n5_mac)["dropped"]
        assert dropped >= 5, dropped
        stats = lab.control("stats", node="n4", peers=False)["nodes"]["n4"]
        assert stats["link_drops"] >= dropped and stats["queue_len"] <= 1, stats
    finally:
        pings.kill()
        pings.wait()
        assert meshemu("move", "n5", "1000", "0", "--lab", CHAIN).returncode == 0


def test_air_capture_through_the_cli(chain, tmp_path):
    """The medium's capture shows the RTS/CTS/data/ACK exchange of a ping."""
    pcap = tmp_path / "air.pcap"
    assert meshemu("capture", "start", str(pcap), "--lab", CHAIN).returncode == 0
    ping_rtts("n0", "n1", count=1)
    stop = meshemu("capture", "stop", "--lab", CHAIN)
    assert stop.returncode == 0, stop.stderr
    frames = subprocess.run(["tshark", "-r", str(pcap), "-T", "fields", "-e", "wlan.fc.type_subtype"],
                            capture_output=True, text=True, check=True).stdout.split()
    subtypes = {int(value, 0) for value in frames}
    assert {0x1b, 0x1c, 0x1d} <= subtypes  # RTS, CTS, ACK
    assert 0x20 in subtypes  # data


def test_status_lists_nodes_and_lateness(chain):
    result = meshemu("status", CHAIN)
    assert result.returncode == 0, result.stderr
    assert f"{CHAIN}-n7" in result.stdout and "10.0.0.8" in result.stdout
    assert "lateness of the medium's actions: p50" in result.stdout
    # As root the medium's event loop (its main thread) runs under SCHED_FIFO by default.
    lab = Lab.attach(CHAIN)
    assert lab.control("lateness")["sched_fifo"] is True
    assert os.sched_getscheduler(read_state(lab.run_dir).medium().pid) == os.SCHED_FIFO


def test_python_api(chain):
    lab = Lab.attach(CHAIN)
    assert lab["n3"].ip == "10.0.0.4" and lab["n3"].netns == f"{CHAIN}-n3"
    assert lab["n3"].position == (600.0, 0.0, 0.0)
    address = lab["n3"].run(["ip", "-4", "-o", "addr", "show", "dev", "wlan0"], check=True)
    assert "10.0.0.4/16" in address.stdout
    hosts = lab["n3"].run(["getent", "hosts", "n7"], check=True)
    assert hosts.stdout.split()[0] == "10.0.0.8"
    with pytest.raises(TypeError):
        lab["n3"].run("ip addr")  # never a shell string
    sleeper = lab["n2"].spawn(["sleep", "30"])
    records = read_state(lab.run_dir).processes
    assert any(record.pid == sleeper.pid and record.node == "n2" for record in records)
    sleeper.kill()
    sleeper.wait()
    links = lab.links()
    assert any(link["a"] == 0 and link["b"] == 1 and link["in_rx_range"] for link in links["links"])


def test_kernel_counters_count_what_each_node_forwarded(chain):
    """`Lab.kernel_counters` reads each node's own MIBs: three pings across
    three hops are forwarded by both relays both ways, and by no one else."""
    lab = Lab.attach(CHAIN)
    before = lab.kernel_counters()
    ping = lab["n0"].run(["ping", "-c", "3", "-i", "0.2", "-W", "3", lab["n3"].ip], check=True)
    moved = kernelstats.metrics(before, lab.kernel_counters())["nodes"]
    assert "3 received" in ping.stdout, ping.stdout
    forwarded = {node: counters.get("Ip", {}).get("ForwDatagrams", 0) for node, counters in moved.items()}
    assert forwarded == {"n0": 0, "n1": 6, "n2": 6, "n3": 0, "n4": 0, "n5": 0, "n6": 0, "n7": 0}
    assert moved["n0"]["Icmp"]["OutEchos"] == 3 and moved["n3"]["Icmp"]["OutEchoReps"] == 3


def test_the_nodes_share_one_hosts_file(chain):
    """Every node's /etc/netns/<ns>/hosts is one file (hard links), which
    `ip netns exec` shows each node as its /etc/hosts."""
    lab = Lab.attach(CHAIN)
    files = [Path("/etc/netns") / node.netns / "hosts" for node in lab]
    assert len({path.stat().st_ino for path in files}) == 1
    assert files[0].stat().st_nlink == len(lab)
    for name in ("n0", "n7"):
        seen = lab[name].run(["cat", "/etc/hosts"], check=True).stdout
        assert seen == files[0].read_text()
        assert f"10.0.0.5\tn4\t{CHAIN}-n4\n" in seen


def test_the_labs_files_lie_in_memory_while_up(chain):
    """rundirs.py: the namespace files and the labs' directories are on a
    tmpfs while a lab is up, also where /run is a disk's (there each new
    file cost up to half a millisecond; the snapshots of
    test_experiment_run.py see that the mounts go with the last lab)."""
    for directory in (NETNS_DIR, RUN_ROOT):
        assert rundirs.in_memory(directory), directory


def test_nodes_forward_and_send_or_take_no_redirects(chain):
    """The sysctls section 4 of emulator/README.md promises in every node:
    `wlan0` has them from `default`, set before it was made."""
    lab = Lab.attach(CHAIN)
    wanted = {"net.ipv4.ip_forward": "1"}
    for scope in ("all", "default", "wlan0"):
        wanted |= {f"net.ipv4.conf.{scope}.{name}": "0" for name in ("send_redirects", "accept_redirects", "rp_filter")}
        wanted[f"net.ipv6.conf.{scope}.disable_ipv6"] = "1"
    for name in ("n0", "n5"):
        values = lab[name].run(["sysctl", "-n", *wanted], check=True).stdout.split()
        assert dict(zip(wanted, values)) == wanted


def test_arp_resolve_once_keeps_a_resolved_neighbour_reachable_unprobed(chain, write):
    """topologies/README.md's `arp`: `kernel` leaves wlan0's neighbour
    table as Linux has it; `resolve_once` makes a resolved entry reachable
    for a day, and one that starts stale (n1's entry for n0, learnt from
    n0's request) waits a day before its first probe."""
    keys = ["net.ipv4.neigh.wlan0.base_reachable_time_ms", "net.ipv4.neigh.wlan0.delay_first_probe_time"]
    kernel = Lab.attach(CHAIN)["n0"].run(["sysctl", "-n", *keys], check=True).stdout.split()
    # A new interface takes the host's defaults (Linux: 30000 and 5).
    host = Path("/proc/sys/net/ipv4/neigh/default")
    assert kernel == [(host / key.rsplit(".", 1)[1]).read_text().strip() for key in keys]
    file = write("a.yaml", "name: tarp\narp: resolve_once\ngenerate: {kind: chain, n: 2, spacing: 200m}\n")
    with Lab(load_topology(file)) as lab:
        for name in ("n0", "n1"):
            assert lab[name].run(["sysctl", "-n", *keys], check=True).stdout.split() == ["86400000", "86400"]
        assert lab["n0"].run(["ping", "-n", "-c", "1", "-W", "2", "n1"]).returncode == 0
        time.sleep(6)  # Linux would have probed n1's entry 5 s after the reply used it

        def state(node: str, address: str) -> list[str]:
            shown = lab[node].run(["ip", "-j", "neigh", "show", "dev", "wlan0", address], check=True).stdout
            return json.loads(shown)[0]["state"]

        assert state("n0", "10.0.0.2") == ["REACHABLE"]
        assert state("n1", "10.0.0.1") == ["DELAY"]
    assert leftovers("tarp") == []


def test_context_manager_removes_everything(tmp_path):
    with Lab.from_file(TOPOLOGIES / "grid5.yaml", name="tctx") as lab:
        assert len(lab) == 25
        assert lab["n0"].run(["ping", "-c", "1", "-W", "2", "n6"]).returncode == 0
        lab["n12"].spawn(["sleep", "300"])
    assert leftovers("tctx") == []


def test_a_held_lab_stands_until_the_time_it_is_resumed_from(write):
    """What the experiment runner does so that its flows meet the motion ns-2
    shows at the same times: the nodes stand from bring-up, are resumed
    from a later model time, stand until then, and from then on follow
    their paths as from time 0 (n1 moves along x at 10 m/s from 0 s)."""
    file = write("h.yaml", "name: thold\ngenerate: {kind: chain, n: 2, spacing: 100m}\n"
                 "nodes:\n  n1: {mobility: {model: setdest, moves: [{at: 0s, to: [1100m, 0m], speed: 10m/s}]}}\n")
    with Lab(load_topology(file), hold_mobility=True) as lab:
        time.sleep(0.3)
        assert lab.positions()["n1"] == [100.0, 0.0, 0.0]
        now = lab.status()["time_ns"]
        with pytest.raises(MediumError, match="has passed"):
            lab.resume_mobility(from_ns=now - 1)
        start = now + 500_000_000
        lab.resume_mobility(from_ns=start)
        standing = lab.control("positions")
        assert standing["time_ns"] < start and standing["nodes"]["n1"] == [100.0, 0.0, 0.0]
        time.sleep(1.0)
        moving = lab.control("positions")
        expected = 100.0 + 10.0 * (moving["time_ns"] - start) / 1e9
        assert moving["nodes"]["n1"][0] == pytest.approx(expected, abs=1e-6)
        assert moving["nodes"]["n1"][0] > 103.0


def arp_table_fulls() -> int:
    """How often the host's ARP table refused an entry (summed over CPUs)."""
    lines = Path("/proc/net/stat/arp_cache").read_text().split("\n")
    column = lines[0].split().index("table_fulls")
    return sum(int(line.split()[column], 16) for line in lines[1:] if line)


def test_a_large_grid_comes_up_with_every_node_reaching_every_other(write):
    """Static routing promises that every node reaches every other along a
    minimum-hop path. A 15 x 20 grid (300 nodes) gets prefix routes, not one
    per destination: probe every node from the two corners and the centre
    (one ping each, 20 a second, up to three tries: a busy 2 Mbit/s medium
    loses some), and check the hop count of the longest path. Its nodes
    need more ARP entries than the host's table holds by default (one
    table for every namespace): none may be refused."""
    file = write("g.yaml", "name: tgrid\nrouting: static\ngenerate: {kind: grid, rows: 15, cols: 20, spacing: 200m}\n")
    refused = arp_table_fulls()
    with Lab.from_file(file) as lab:
        assert len(lab) == 300
        for source in ("n0", "n299", "n150"):
            ping = "ping -c 1 -W 10 n$i >/dev/null 2>&1"
            script = f"for i in $(seq 0 299); do ({ping} || {ping} || {ping} || echo n$i) & sleep 0.05; done; wait"
            unreached = lab[source].run(["sh", "-c", script], timeout=120, check=True).stdout.split()
            assert unreached == [], f"{source} does not reach {unreached}"
        # n0 to n299 is 14 + 19 hops on the grid: the reply's TTL is 64 less the 32 nodes that forwarded it.
        reply = lab["n0"].run(["ping", "-c", "1", "-W", "10", "n299"], timeout=30, check=True).stdout
        assert "ttl=32 " in reply, reply
        routes = lab["n150"].run(["ip", "-4", "route", "show"], timeout=10, check=True).stdout.splitlines()
        assert 1 < len(routes) < 150, routes  # far fewer than a host route to each of 300 nodes
    assert arp_table_fulls() == refused
    assert leftovers("tgrid") == []


def test_labs_make_room_in_the_host_arp_table_while_up_and_put_its_limits_back():
    """The host's ARP limits are raised for the labs that are up, by each
    lab's nodes, and put back as they were when no lab needs more. Other
    labs may be up (this module's chain): their room counts too."""
    assert not arptable.SAVED.exists(), "the host's limits are raised already"
    host, others = arptable.Limits.read(), arptable.demand()
    one = arptable.limits_for(host, others + arptable.entries(25))
    two = arptable.limits_for(host, others + 2 * arptable.entries(25))
    assert host.gc_thresh2 < one.gc_thresh2 < two.gc_thresh2
    first = Lab.from_file(TOPOLOGIES / "grid5.yaml", name="tarp1").up()
    try:
        assert arptable.Limits.read() == one
        with Lab.from_file(TOPOLOGIES / "grid5.yaml", name="tarp2"):
            assert arptable.Limits.read() == two
        assert arptable.Limits.read() == one
    finally:
        report = first.down()
    assert arptable.Limits.read() == host
    assert any("put back the host's ARP table limits" in line for line in report), report


def test_a_failed_bring_up_leaves_nothing(write):
    """Root without CAP_NET_ADMIN (as in a container that grants too little;
    nothing validation can see): the medium makes namespaces, is refused their
    sysctls and exits. The error carries the kernel's reason and nothing of
    the lab remains."""
    file = write("t.yaml", "name: tfail\ngenerate: {kind: chain, n: 3, spacing: 200m}\n")
    result = subprocess.run(["setpriv", "--bounding-set", "-net_admin", "--",
                             sys.executable, "-m", "meshemu", "up", str(file)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "the medium exited with status 1" in result.stderr
    assert "setting sysctls" in result.stderr and "Operation not permitted" in result.stderr
    assert "Traceback" not in result.stderr
    assert leftovers("tfail") == []


def test_a_lab_of_more_nodes_than_the_open_file_limit_comes_up(write):
    """The medium holds a descriptor per node: a lab of 100 nodes started
    with a soft open-file limit of 64 (Debian's default of 1024 is as short
    for 1000 nodes) raises its own limit and comes up."""
    file = write("t.yaml", "name: tfiles\ngenerate: {kind: grid, rows: 10, cols: 10, spacing: 200m}\n")

    def low_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    up = subprocess.run([sys.executable, "-m", "meshemu", "up", str(file)], capture_output=True, text=True,
                        timeout=120, preexec_fn=low_limit)
    try:
        assert up.returncode == 0, up.stderr
        lab = Lab.attach("tfiles")
        assert lab["n0"].run(["ping", "-c", "1", "-W", "5", "n99"]).returncode == 0
    finally:
        meshemu("down", "tfiles")
        meshemu("cleanup", "tfiles")
    assert leftovers("tfiles") == []

def test_kill_9_everything_then_cleanup():
    name = "tkill"
    interfaces_before = set(os.listdir("/sys/class/net"))
    lab = Lab.from_file(TOPOLOGIES / "chain7.yaml", name=name).up()
    try:
        lab["n1"].spawn(["sleep", "300"])
        unrecorded = subprocess.Popen(["ip", "netns", "exec", f"{name}-n5", "sleep", "300"], start_new_session=True)
        time.sleep(0.2)
        state = read_state(lab.run_dir)
        for record in state.processes:
            procs.signal_process(record.id, signal.SIGKILL)
        os.kill(unrecorded.pid, signal.SIGKILL)
        unrecorded.wait()
        medium = state.medium()
        assert medium is not None and procs.wait_gone([medium.id], 5) == []
        assert [ns for ns in namespaces() if ns.startswith(f"{name}-")]  # left behind by the crash
        result = meshemu("cleanup", name)
        assert result.returncode == 0, result.stderr
        assert f"deleted namespace {name}-n0" in result.stdout
    finally:
        meshemu("cleanup", name)
    assert leftovers(name) == []
    assert set(os.listdir("/sys/class/net")) == interfaces_before
    assert procs.processes_in_netns(set(state.netns_inodes.values())) == []


CYCLES = int(os.environ.get("MESHEMU_CYCLES", "200"))


@pytest.mark.slow
def _mounts_but_other_labs(lab: str) -> list[str]:
    """The host's mounts, less the namespaces of other labs (a user's lab up
    beside the tests mounts and unmounts its own)."""
    return [line for line in Path("/proc/self/mountinfo").read_text().splitlines()
            if " /run/netns/" not in line or f" /run/netns/{lab}-" in line]


def test_up_down_cycles_leave_nothing_behind():
    interfaces_before = set(os.listdir("/sys/class/net"))
    mounts_before = _mounts_but_other_labs("tcycle")
    for cycle in range(CYCLES):
        lab = Lab.from_file(TOPOLOGIES / "grid5.yaml", name="tcycle")
        lab.up()
        lab.down()
        assert not (RUN_ROOT / "tcycle").exists(), cycle
    assert leftovers("tcycle") == []
    assert set(os.listdir("/sys/class/net")) == interfaces_before
    assert _mounts_but_other_labs("tcycle") == mounts_before
