"""The hwsim backend with the kernel's own 802.11 stack. These tests need a
kernel with mac80211_hwsim: they run inside the VM (tests/test_vm.py starts
them there with `meshemu vm -- python -m pytest tests/test_hwsim.py`) and
skip elsewhere, except the one that checks the error a kernel without it gives.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from meshemu import Lab, LabError, load_topology
from meshemu import hwsim, procs
from meshemu.bench import hwsim as agreement
from meshemu.state import RUN_ROOT, read_state

from conftest import namespaces

pytestmark = pytest.mark.root

CHAIN3 = """\
name: {name}
backend: {{kind: hwsim, mode: ibss, ssid: meshemu-ci, frequency: 2412MHz}}
generate: {{kind: chain, n: 3, spacing: 200m}}
"""


def hwsim_possible() -> bool:
    if Path("/sys/module/mac80211_hwsim").is_dir():
        return True
    return subprocess.run(["modprobe", "-n", "mac80211_hwsim"], capture_output=True).returncode == 0


needs_hwsim = pytest.mark.skipif(not hwsim_possible(), reason="no mac80211_hwsim here (runs in the VM: test_vm.py)")


def chain(write, name: str) -> Path:
    return write(f"{name}.yaml", CHAIN3.format(name=name))


@pytest.mark.skipif(hwsim_possible(), reason="this kernel has mac80211_hwsim")
def test_a_kernel_without_hwsim_is_a_clear_error_pointing_to_the_vm(write):
    lab = Lab.from_file(chain(write, "hwnone"))
    before = namespaces()
    with pytest.raises(LabError, match=r"no mac80211_hwsim .*meshemu vm --"):
        lab.up()
    assert namespaces() == before


@needs_hwsim
def test_ibss_chain_joins_pings_over_two_hops_and_carries_vegas(write, tmp_path):
    # The VM's guest loaded every congestion control Debian ships, so that
    # experiments plan with them (plan.py reads this list).
    available = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    assert {"vegas", "westwood", "htcp"} <= set(available), available
    with Lab.from_file(chain(write, "hwci")) as lab:
        # Every radio joined the IBSS before up() returned.
        for node in lab:
            link = node.run(["iw", "dev", "wlan0", "link"], check=True).stdout
            assert "Joined IBSS 02:6d:65:73:68:00" in link, link
        capture = tmp_path / "air.pcap"
        lab.capture(capture)
        ping = lab["n0"].run(["ping", "-c", "3", "-i", "0.5", "-W", "10", "n2"], timeout=60)
        assert ping.returncode == 0, ping.stdout + ping.stderr
        assert "3 received" in ping.stdout
        route = lab["n0"].run(["ip", "route", "get", "10.0.0.3"], check=True).stdout
        assert "via 10.0.0.2" in route, "two hops over the static route"

        server = lab["n2"].spawn(["iperf3", "-s", "-1", "-J"], stdout=subprocess.PIPE)
        time.sleep(1.0)
        client = lab["n0"].run(["iperf3", "-c", "10.0.0.3", "-t", "4", "-C", "vegas", "-J"], timeout=120)
        assert client.returncode == 0, client.stderr
        report = json.loads(client.stdout)
        assert report["end"]["sender_tcp_congestion"] == "vegas"
        received = report["end"]["sum_received"]["bytes"]
        assert received > 50_000, f"only {received} bytes over two 2 Mbit/s hops"
        server.wait(timeout=30)
        lab.capture(None, run=False)

        stats = lab.stats()
        relay = stats["n1"]
        # The relay forwarded the flow: the model's DCF counted RTS/CTS, data, ACKs.
        assert relay["tx_data_frames"] > 20 and relay["acks_sent"] > 20 and relay["cts_sent"] > 20
        assert stats["n0"]["rts_attempts"] >= stats["n0"]["tx_data_frames"] > 20
        assert stats["n0"]["tx_broadcast_frames"] > 0, "beacons and ARP go through the model too"

    frames = subprocess.run(["tshark", "-r", str(capture), "-T", "fields", "-e", "wlan.fc.type_subtype"],
                            capture_output=True, text=True, check=True).stdout.split()
    kinds = {int(value, 0) for value in frames}
    assert 0x0008 in kinds, "beacons from mac80211"
    assert {0x0020, 0x0028} & kinds, "data frames"
    assert 0x001d in kinds and 0x001b in kinds, "ACKs and RTS of the model"
    assert not [ns for ns in namespaces() if ns.startswith("hwci-")]
    assert subprocess.run(["iw", "dev"], capture_output=True, text=True).stdout.strip() == "", "radios destroyed"


@needs_hwsim
def test_a_second_medium_cannot_register(write):
    with Lab.from_file(chain(write, "hwone")):
        second = Lab.from_file(chain(write, "hwtwo"))
        with pytest.raises(LabError, match="refused the registration"):
            second.up()
        assert not [ns for ns in namespaces() if ns.startswith("hwtwo-")]


@needs_hwsim
def test_sigkill_of_the_medium_destroys_the_radios_and_cleanup_leaves_nothing(write):
    name = "hwkill"
    interfaces_before = set(os.listdir("/sys/class/net"))
    lab = Lab.from_file(chain(write, name)).up()
    try:
        def radios() -> list[str]:
            return [node.name for node in lab if "wlan0" in node.run(["ip", "-o", "link", "show"]).stdout]

        assert radios() == ["n0", "n1", "n2"]
        lab["n1"].spawn(["sleep", "300"])
        state = read_state(lab.run_dir)
        medium = state.medium()
        assert medium is not None and procs.signal_process(medium.id, signal.SIGKILL)
        assert procs.wait_gone([medium.id], 10) == []
        # HWSIM_ATTR_DESTROY_RADIO_ON_CLOSE: the kernel removes the radios
        # with the medium's socket; the namespaces stay until the cleanup.
        deadline = time.monotonic() + 10
        while radios() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert radios() == []
        assert [ns for ns in namespaces() if ns.startswith(f"{name}-")]

        result = subprocess.run([sys.executable, "-m", "meshemu", "cleanup", name], capture_output=True, text=True,
                                timeout=120)
        assert result.returncode == 0, result.stderr
        assert f"deleted namespace {name}-n0" in result.stdout
    finally:
        lab.down()
    assert [ns for ns in namespaces() if ns.startswith(f"{name}-")] == []
    assert not (RUN_ROOT / name).exists() and not list(Path("/etc/netns").glob(f"{name}-*"))
    assert set(os.listdir("/sys/class/net")) == interfaces_before
    assert procs.processes_in_netns(set(state.netns_inodes.values())) == []


def test_backend_vm_outside_the_vm_says_how_to_run_it(write):
    if hwsim.in_vm():
        pytest.skip("inside the VM")
    path = write("hwvm.yaml", CHAIN3.format(name="hwvm").replace("frequency: 2412MHz", "vm: true"))
    assert load_topology(path).backend["vm"] is True
    with pytest.raises(LabError, match=r"backend.vm: true.*meshemu vm --"):
        Lab.from_file(path).up()


# --- the backend agreement benchmark (python -m meshemu.bench.hwsim) ----------------

def test_the_benchmark_reads_what_the_udp_server_received():
    # iperf3 3.12's server report (abridged): `sum` is what the server sent.
    report = {"end": {"sum": {"bytes": 0, "bits_per_second": 0, "sender": False},
                      "sum_received": {"bytes": 1027840, "bits_per_second": 1526004.3, "sender": False}}}
    assert agreement.received_kbps(report) == pytest.approx(1526.0043)


def test_a_backend_that_delivers_nothing_is_reported_not_a_crash():
    def sample(backend, hops, kbps):
        return agreement.Sample(backend, hops, 0, kbps, None, None, {})

    lines = agreement.table([sample("tap", 1, 0.0), sample("hwsim", 1, 700.0), sample("tap", 2, 0.0),
                         sample("hwsim", 2, 0.0), sample("tap", 3, 800.0), sample("hwsim", 3, 0.0),
                         sample("tap", 4, 400.0), sample("hwsim", 4, 380.0)])
    ratios = [line.split("|")[3].strip() for line in lines[1:]]
    assert ratios == ["tap 0", "both 0", "0.00", "0.95"]
