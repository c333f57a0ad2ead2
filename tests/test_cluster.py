"""`meshemu run --cluster` (issue 21) on a cluster on this host: a scheduler
and two workers of one lab slot each (with --jobs 1 one lab runs at a time,
so no lab is late because of another). A small sweep gets the same records
as a local run; a worker of another meshemu is refused; a worker killed
mid-run loses nothing, its run runs again on the other worker and its lab is
removed when it comes back; a worker stopped with SIGTERM tears its lab down
first; Ctrl-C on the head stops the remote lab; nothing is served outside
the cluster's TLS."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import REPO, ctrl_c_reaches, reaped
from meshemu import procs
from meshemu.experiment.clusterhost import ClusterError, Needs, create_secret, refusal, security, tls_address
from meshemu.experiment.results import read_records, software_version
from meshemu.state import lab_names, read_state, run_dir_of
from test_experiment_run import processes_of_runs, run_labs

# Four runs of 3 s: UDP far below what one or two hops carry, so its goodput
# is the offered load in every run, wherever it runs.
SWEEP = """\
description: a small sweep for the cluster
topology:
  generate: {kind: chain, n: 3, spacing: 200m}
duration: 3s
seeds: [1, 2]
traffic:
  - {kind: udp, name: udp, src: n0, dst: n1, rate: 200kbps, packet: 500B, start: 0s, stop: 3s}
measure: {drain: 0s}
sweep:
  traffic.0.dst: [n1, n2]
"""
# Three runs long enough to kill a worker, or Ctrl-C the head, in the middle of one.
LONGER = """\
description: runs to interrupt
topology:
  generate: {kind: chain, n: 2, spacing: 200m}
duration: 6s
seed: 1
traffic:
  - {kind: udp, name: udp, src: n0, dst: n1, rate: 100kbps, packet: 500B, start: 0s, stop: 6s}
measure: {drain: 0s}
sweep:
  traffic.0.rate: [100kbps, 150kbps, 200kbps]
"""
WAIT_S = 60


def meshemu(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "meshemu", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=REPO)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Hosts:
    """A scheduler and workers on this host, each a `meshemu` process with its log."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.secret = directory / "secret.pem"
        self.address = f"tls://127.0.0.1:{free_port()}"
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.start("scheduler", ["scheduler", "--port", self.address.rsplit(":", 1)[1]], "scheduler at tls://")

    def log(self, name: str) -> str:
        return (self.directory / f"{name}.log").read_text(errors="replace")

    def start(self, name: str, argv: list[str], ready: str, env: dict[str, str] | None = None) -> None:
        with open(self.directory / f"{name}.log", "wb") as log:
            self.processes[name] = subprocess.Popen([sys.executable, "-m", "meshemu", *argv, "--secret",
                                                     str(self.secret)], stdout=log, stderr=subprocess.STDOUT,
                                                    cwd=REPO, env=env)
        deadline = time.monotonic() + WAIT_S
        while ready not in self.log(name):
            assert self.processes[name].poll() is None and time.monotonic() < deadline, self.log(name)
            time.sleep(0.1)

    def worker(self, name: str, env: dict[str, str] | None = None) -> None:
        self.start(name, ["worker", self.address, "--slots", "1", "--name", name], f"worker {name} at", env)

    def stop(self, name: str) -> None:
        process = self.processes.pop(name)
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def close(self) -> None:
        for name in [name for name in self.processes if name != "scheduler"] + ["scheduler"]:
            self.stop(name)


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory):
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    hosts = Hosts(tmp_path_factory.mktemp("cluster"))
    try:
        hosts.worker("w1")
        hosts.worker("w2")
        yield hosts
    finally:
        hosts.close()


@pytest.fixture(autouse=True)
def nothing_left_behind():
    yield
    assert run_labs() == []
    assert processes_of_runs() == []


def head(hosts: Hosts, experiment: Path, out: Path, *options: str) -> list[str]:
    """`meshemu run` of the experiment on the cluster, one run at a time."""
    return [sys.executable, "-m", "meshemu", "run", str(experiment), "--out", str(out), "--cluster", hosts.address,
            "--secret", str(hosts.secret), "--jobs", "1", *options]


def start_head(argv: list[str], **popen: object) -> subprocess.Popen[str]:
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, **popen)


def planned_ids(experiment: Path) -> list[str]:
    listed = meshemu("run", str(experiment), "--dry-run")
    return sorted(line.split()[0] for line in listed.stdout.splitlines())


def running_lab(hosts: Hosts) -> tuple[str, str]:
    """A runner's lab with its medium up, and the worker whose process runs it."""
    pids = {process.pid: name for name, process in hosts.processes.items()}
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        for lab in [name for name in lab_names() if name.startswith("x")]:
            try:
                medium = read_state(run_dir_of(lab)).medium()
            except Exception:
                continue
            pid = medium.pid if medium else None
            while pid and pid not in pids:
                fields = procs.stat_fields(pid)
                pid = int(fields[1]) if fields else None
            if pid:
                return lab, pids[pid]
        time.sleep(0.1)
    raise AssertionError("no lab came up on a worker")


def listeners(pid: int) -> set[tuple[str, int]]:
    """The TCP addresses and ports process `pid` listens on."""
    lines = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout.splitlines()
    found = set()
    for line in lines:
        if f"pid={pid}," in line:
            host, _, port = line.split()[3].rpartition(":")
            found.add((host, int(port)))
    return found


@pytest.mark.root
@pytest.mark.slow
def test_the_cluster_serves_nothing_outside_its_tls(hosts):
    # Beside the TLS port it announced, each process has Dask's HTTP server (dashboard, metrics,
    # health), which cannot authenticate its client: on loopback, and 404 to every route Dask has.
    comm_ports = {int(hosts.address.rsplit(":", 1)[1])}
    comm_ports |= {int(re.search(rf"worker {name} at tls://[^ ]+:(\d+)", hosts.log(name))[1]) for name in ("w1", "w2")}
    for name in ("scheduler", "w1", "w2"):
        http = {(host, port) for host, port in listeners(hosts.processes[name].pid) if port not in comm_ports}
        assert len(http) == 1 and all(host == "127.0.0.1" for host, _ in http), (name, http)
        for _, port in http:
            for path in ("/status", "/health", "/metrics", "/info/main/workers.html", "/json/identity.json"):
                with pytest.raises(urllib.error.HTTPError, match="404"):
                    urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10)


@pytest.mark.root
@pytest.mark.slow
def test_a_sweep_on_the_cluster_records_what_a_local_run_does(hosts, write, tmp_path):
    experiment = write("sweep.yaml", SWEEP)
    # A worker whose meshemu is not the head's (a copy of the package outside this git tree).
    elsewhere = tmp_path / "other-meshemu"
    shutil.copytree(REPO / "emulator" / "meshemu", elsewhere / "meshemu",
                    ignore=shutil.ignore_patterns("__pycache__"))
    hosts.worker("w3", env={**os.environ, "PYTHONPATH": str(elsewhere)})
    try:
        local = meshemu("run", str(experiment), "--out", str(tmp_path / "local"))
        assert local.returncode == 0, local.stderr
        remote = subprocess.run(head(hosts, experiment, tmp_path / "remote"), capture_output=True, text=True,
                                cwd=REPO, timeout=300)
    finally:
        hosts.stop("w3")
    assert remote.returncode == 0, remote.stderr
    assert "refusing worker w3" in remote.stderr and "git none" in remote.stderr, remote.stderr
    by_id = {record["run_id"]: record for record in read_records(tmp_path / "local" / "runs.jsonl")}
    records = read_records(tmp_path / "remote" / "runs.jsonl")
    assert len(records) == 4 and {record["run_id"] for record in records} == set(by_id)
    for record in records:
        mine = by_id[record["run_id"]]
        assert record.keys() == mine.keys()
        for key in ("experiment", "driver", "params", "seed", "config", "software"):
            assert record[key] == mine[key], key
        assert record["host"] in ("w1", "w2")
        assert record["lateness"]["max_ns"] >= 0
        flow, local_flow = record["metrics"]["flows"][0], mine["metrics"]["flows"][0]
        assert flow.keys() == local_flow.keys()
        assert flow["hops"] == local_flow["hops"]
        assert flow["goodput_bps"] == pytest.approx(local_flow["goodput_bps"], rel=0.1)
        assert (tmp_path / "remote" / "runs" / record["run_id"] / "udp.recv.jsonl").is_file()
    assert (tmp_path / "remote" / "runs.csv").is_file()
    # --resume on the cluster finds everything recorded.
    resumed = subprocess.run(head(hosts, experiment, tmp_path / "remote", "--resume"), capture_output=True,
                             text=True, cwd=REPO, timeout=120)
    assert resumed.returncode == 0 and "4 recorded before (skipped)" in resumed.stderr, resumed.stderr


@pytest.mark.root
def test_sim_runs_on_the_cluster_are_the_local_records_but_for_host_and_timing(hosts, write, tmp_path):
    """The sim driver is deterministic: the records agree to the last digit."""
    experiment = write("sweep.yaml", SWEEP)
    local = meshemu("run", str(experiment), "--driver", "sim", "--out", str(tmp_path / "local"))
    assert local.returncode == 0, local.stderr
    remote = subprocess.run(head(hosts, experiment, tmp_path / "remote", "--driver", "sim"), capture_output=True,
                            text=True, cwd=REPO, timeout=120)
    assert remote.returncode == 0, remote.stderr
    by_id = {record["run_id"]: record for record in read_records(tmp_path / "local" / "runs.jsonl")}
    records = read_records(tmp_path / "remote" / "runs.jsonl")
    assert len(records) == 4 and {record["run_id"] for record in records} == set(by_id)
    for record in records:
        assert record["host"] in ("w1", "w2")
        differ = {key for key in record if record[key] != by_id[record["run_id"]][key]}
        assert differ <= {"host", "started", "duration_s"}


@pytest.mark.root
@pytest.mark.slow
def test_a_worker_killed_mid_run_loses_nothing_and_its_lab_goes_when_it_comes_back(hosts, write, tmp_path):
    experiment = write("longer.yaml", LONGER)
    out = tmp_path / "results"
    remote = start_head(head(hosts, experiment, out))
    with reaped(remote):
        lab, victim = running_lab(hosts)
        time.sleep(1.0)  # into the run
        hosts.processes[victim].send_signal(signal.SIGKILL)
        hosts.processes.pop(victim).wait()
        assert lab in lab_names()  # left behind by the killed worker
        hosts.worker(victim)
        assert f"removed lab {lab}" in hosts.log(victim)
        assert lab not in lab_names()
        _, stderr = remote.communicate(timeout=300)
    assert remote.returncode == 0, stderr
    assert "running again on" in stderr, stderr
    records = read_records(out / "runs.jsonl")
    assert sorted(record["run_id"] for record in records) == planned_ids(experiment)
    assert len(records) == 3
    assert not (out / "failed.jsonl").exists()
    assert not list((out / "runs").glob("*.partial"))


@pytest.mark.root
@pytest.mark.slow
def test_a_worker_stopped_mid_run_tears_its_lab_down_and_the_run_runs_elsewhere(hosts, write, tmp_path):
    experiment = write("longer.yaml", LONGER)
    out = tmp_path / "results"
    remote = start_head(head(hosts, experiment, out))
    with reaped(remote):
        lab, victim = running_lab(hosts)
        time.sleep(1.0)
        hosts.stop(victim)  # SIGTERM, as a host's shutdown
        assert lab not in lab_names()
        hosts.worker(victim)
        _, stderr = remote.communicate(timeout=300)
    assert remote.returncode == 0, stderr
    assert sorted(record["run_id"] for record in read_records(out / "runs.jsonl")) == planned_ids(experiment)
    assert not (out / "failed.jsonl").exists()


@pytest.mark.root
@pytest.mark.slow
def test_ctrl_c_on_the_head_stops_the_remote_lab_and_records_nothing(hosts, write, tmp_path):
    experiment = write("longer.yaml", LONGER)
    out = tmp_path / "results"
    remote = start_head(head(hosts, experiment, out), preexec_fn=ctrl_c_reaches)
    with reaped(remote):
        running_lab(hosts)
        time.sleep(1.0)
        remote.send_signal(signal.SIGINT)
        _, stderr = remote.communicate(timeout=120)
    assert remote.returncode == 130, stderr
    assert "interrupted" in stderr
    assert run_labs() == []  # the head waited for the worker to tear its lab down
    assert read_records(out / "runs.jsonl") == []


# --- without labs ---

def test_the_secret_gives_mutual_tls_and_addresses_are_tls_only(tmp_path):
    pytest.importorskip("distributed")
    secret = tmp_path / "secret.pem"
    create_secret(secret)
    assert secret.stat().st_mode & 0o777 == 0o600
    tls = security(secret)
    assert tls.require_encryption and "BEGIN CERTIFICATE" in tls.tls_ca_file
    with pytest.raises(ClusterError, match="no cluster secret"):
        security(tmp_path / "missing.pem")
    assert tls_address("head.example") == "tls://head.example:8786"
    assert tls_address("tls://10.0.0.1:9000") == "tls://10.0.0.1:9000"
    with pytest.raises(ClusterError, match="only tls://"):
        tls_address("tcp://10.0.0.1:8786")


def test_a_host_with_another_meshemu_is_refused_naming_both_versions():
    other = {**software_version(), "git": "0000000"}
    why = refusal(Needs(other, frozenset(), labs=False))
    assert why is not None and "git 0000000" in why and "./setup.sh" in why
    assert refusal(Needs(software_version(), frozenset(), labs=False)) is None
    missing = refusal(Needs(software_version(), frozenset({"no-such-program-here"}), labs=False))
    assert missing is not None and "no-such-program-here" in missing


def test_report_groups_by_host_when_asked(tmp_path):
    directory = tmp_path / "results"
    directory.mkdir()
    records = [{"run_id": f"{n}-{seed}", "experiment": "e", "driver": "lab", "host": f"w{seed % 2 + 1}",
                "params": {"topology.generate.n": n}, "seed": seed,
                "metrics": {"flows": [{"name": "f", "hops": n - 1, "goodput_bps": 100_000 * n + 1000 * seed}]}}
               for n in (2, 3) for seed in (1, 2, 3, 4)]
    (directory / "runs.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    result = meshemu("report", str(directory), "--group", "host", "--metric", "goodput_bps")
    assert result.returncode == 0, result.stderr
    summary = (directory / "report" / "summary.csv").read_text().splitlines()
    assert summary[0].startswith("n,host,metric,runs,mean")
    # w1 ran seeds 2 and 4, w2 seeds 1 and 3.
    means = {tuple(line.split(",")[:2]): float(line.split(",")[4]) for line in summary[1:]}
    assert means == {("2", "w1"): 203_000, ("2", "w2"): 202_000, ("3", "w1"): 303_000, ("3", "w2"): 302_000}
    # Without asking, runs of every host are one group.
    plain = meshemu("report", str(directory), "--metric", "goodput_bps")
    assert plain.returncode == 0, plain.stderr
    assert (directory / "report" / "summary.csv").read_text().splitlines()[0].startswith("n,metric,runs")
