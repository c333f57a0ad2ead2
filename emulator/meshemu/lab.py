"""Labs: a topology brought up as network namespaces on the real-time medium.

    with Lab.from_file("topologies/chain7.yaml") as lab:
        result = lab["n0"].run(["ping", "-c", "3", "n7"])

`up()` records everything in the state file before creating it, starts
`meshemu-medium tap` detached (it creates the namespaces and TAPs, section 4
of emulator/README.md) and waits for its ready line; `down()` removes it all
again (see teardown.py). Commands run in nodes through `ip netns exec` with
argument lists, never through a shell.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Sequence

from . import arptable, kernelstats, medium, procs, queueing, routing, rundirs
from .backends import LabBackend, TapLabBackend, backend_of
from .choices import only_in_ns2
from .errors import LabError, MeshemuError
from .schema import LAB_NAME
from .state import (
    NETNS_DIR, LabState, ProcessRecord, chosen_lab, read_state, record_process, run_dir_of, updating, write_state,
)
from .teardown import teardown
from .topology import Topology, load_topology

HOSTS_ROOT = Path("/etc/netns")
LAB_FILE = "LAB.json"
MEDIUM_OUT = "medium.out"
MEDIUM_ERR = "medium.err"
CONTROL_SOCKET = "control.sock"


@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str
    stderr: str


class CommandFailed(MeshemuError):
    def __init__(self, node: str, argv: Sequence[str], result: Result):
        self.result = result
        detail = result.stderr.strip().splitlines()[-1:] or ["no error output"]
        super().__init__(f"{shlex.join(argv)} on {node} exited with {result.returncode}: {detail[0]}")


def _check_argv(argv: Sequence[str]) -> list[str]:
    if isinstance(argv, (str, bytes)) or not all(isinstance(arg, str) for arg in argv) or not argv:
        raise TypeError("pass the command as a non-empty list of strings, e.g. ['ping', '-c', '1', 'n1']")
    return list(argv)


class Process:
    """A program started in a node with `Node.spawn`; recorded in the lab's
    state, so `down` stops it if it is still running."""

    def __init__(self, popen: subprocess.Popen[bytes], node: str, argv: list[str]):
        self._popen = popen
        self.node = node
        self.argv = argv

    @property
    def pid(self) -> int:
        return self._popen.pid

    def poll(self) -> int | None:
        """The exit status, or None while it runs."""
        return self._popen.poll()

    def wait(self, timeout: float | None = None) -> int:
        return self._popen.wait(timeout)

    def terminate(self) -> None:
        self._popen.terminate()

    def kill(self) -> None:
        self._popen.kill()


class Node:
    def __init__(self, lab: "Lab", index: int, name: str, ip: str, netns: str, position: tuple[float, ...]):
        self.lab = lab
        self.index = index
        self.name = name
        self.ip = ip
        self.netns = netns
        self.initial_position = position

    def __repr__(self) -> str:
        return f"Node({self.name!r}, ip={self.ip!r}, netns={self.netns!r})"

    @property
    def position(self) -> tuple[float, float, float]:
        """Where the node is now (asks the medium when the lab is up)."""
        if not self.lab.is_up():
            return tuple(self.initial_position)  # type: ignore[return-value]
        return tuple(self.lab.positions()[self.name])  # type: ignore[return-value]

    def command(self, argv: Sequence[str]) -> list[str]:
        """The argument list that runs `argv` inside this node."""
        return ["ip", "netns", "exec", self.netns, *_check_argv(argv)]

    def run(self, argv: Sequence[str], timeout: float | None = None, check: bool = False,
            input: str | None = None) -> Result:
        """Run a program in the node and wait for it."""
        try:
            completed = subprocess.run(self.command(argv), capture_output=True, encoding="utf-8", errors="replace",
                                       timeout=timeout, input=input,
                                       stdin=subprocess.DEVNULL if input is None else None, check=False)
        except subprocess.TimeoutExpired:
            raise LabError(f"{shlex.join(argv)} on {self.name} did not finish within {timeout} s") from None
        result = Result(completed.returncode, completed.stdout, completed.stderr)
        if check and result.returncode != 0:
            raise CommandFailed(self.name, argv, result)
        return result

    def spawn(self, argv: Sequence[str], stdout: int | IO[Any] | None = subprocess.DEVNULL,
              stderr: int | IO[Any] | None = subprocess.DEVNULL) -> Process:
        """Start a program in the node without waiting for it."""
        command = self.command(argv)
        popen = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
                                 start_new_session=True)
        # `ip netns exec` execs the program: the PID is the program's own.
        started = procs.start_time(popen.pid)
        try:
            if started is not None:
                record_process(self.lab.run_dir, ProcessRecord(popen.pid, started, "node", self.name, list(argv)))
        except LabError:
            popen.kill()
            popen.wait()
            raise
        process = Process(popen, self.name, list(argv))
        self.lab._spawned.append(process)
        return process


class Lab:
    """A lab: a topology and, once `up`, its namespaces and medium."""

    def __init__(self, topology: Topology, name: str | None = None, hold_mobility: bool = False):
        """`hold_mobility`: the nodes stand at their time-0 positions until
        `resume_mobility` (an experiment run's time 0)."""
        lab_name = name or topology.name
        if lab_name is None:
            raise LabError(f"{topology.source}: the topology has no name: add name: to the file or pass a name")
        if not LAB_NAME.match(lab_name):
            raise LabError(f"bad lab name {lab_name!r}: a lower-case letter, then up to 15 of a-z, 0-9, '-'")
        source = Path(topology.source)
        self._setup(lab_name, str(source.resolve()) if source.is_file() else None,
                    topology.lab_config(lab_name, run_dir_of(lab_name), hold_mobility))
        self.backend = backend_of(topology.backend)
        self.routing = topology.routing_choice  # the daemons `up` starts (routing.py)
        self.queueing = topology.queueing  # bpd in every node unless fifo (queueing.py)

    def _setup(self, name: str, source: str | None, config: dict[str, Any]) -> None:
        self.name = name
        self.source = source  # the topology file, if any
        self.run_dir = run_dir_of(name)
        self.config = config  # LAB.json (section 4)
        self.ready: dict[str, Any] | None = None  # the medium's ready line
        self._medium: subprocess.Popen[bytes] | None = None
        self._spawned: list[Process] = []  # to reap them at down
        self.backend: LabBackend = TapLabBackend({"kind": "tap"})  # how the nodes attach (backends.py)
        self.nodes: dict[str, Node] = {}
        for index, (entry, node) in enumerate(zip(config["nodes"], config["medium"]["nodes"])):
            self.nodes[node["name"]] = Node(self, index, node["name"], entry["ipv4"], entry["netns"],
                                            tuple(node["position"]))

    @classmethod
    def from_file(cls, path: str | Path, name: str | None = None) -> "Lab":
        return cls(load_topology(path), name)

    @classmethod
    def attach(cls, name: str | None = None) -> "Lab":
        """A lab that is already up (started by this or another process).
        Without a name: the only lab that is up."""
        name = chosen_lab(name)
        run_dir = run_dir_of(name)
        try:
            config = json.loads((run_dir / LAB_FILE).read_text())
            state = read_state(run_dir)
        except FileNotFoundError:
            raise LabError(f"lab {name!r} is not up (no {run_dir / LAB_FILE})") from None
        except (OSError, ValueError) as exc:
            raise LabError(f"lab {name!r}: cannot read {run_dir / LAB_FILE}: {exc}") from None
        lab = cls.__new__(cls)
        lab._setup(name, state.topology, config)
        lab.routing = routing.saved_choice(run_dir)
        lab.queueing = queueing.saved_choice(run_dir)
        lab.ready = lab._read_ready()
        return lab

    # --- nodes ---

    def processes(self, program: str) -> list[Process]:
        """The processes of `program` (its file name) this Lab object started."""
        return [process for process in self._spawned if Path(process.argv[0]).name == program]

    def __getitem__(self, name: str) -> Node:
        try:
            return self.nodes[name]
        except KeyError:
            raise LabError(f"lab {self.name!r} has no node {name!r} (nodes: {_summary(list(self.nodes))})") from None

    def __iter__(self):
        return iter(self.nodes.values())

    def __len__(self) -> int:
        return len(self.nodes)

    # --- life cycle ---

    def __enter__(self) -> "Lab":
        return self.up()

    def __exit__(self, *exc_info: Any) -> None:
        self.down()

    def is_up(self) -> bool:
        try:
            medium_record = read_state(self.run_dir).medium()
        except LabError:
            return False
        return medium_record is not None and procs.is_alive(medium_record.id)

    def up(self, timeout: float | None = None) -> "Lab":
        """Create the lab; returns once the medium reports it ready."""
        if os.geteuid() != 0:
            raise LabError("a lab needs root (it creates network namespaces): run as root")
        if self.routing.kind.ns2_only:
            raise LabError(only_in_ns2(self.routing.name))
        program = medium.find_program()
        self.backend.check()
        namespaces = [entry["netns"] for entry in self.config["nodes"]]
        self._check_free(namespaces)
        state = LabState(self.name, str(self.run_dir), topology=self.source, namespaces=namespaces,
                         arp_entries=arptable.entries(len(namespaces)))
        if not HOSTS_ROOT.is_dir():
            state.dirs.append(str(HOSTS_ROOT))
        for namespace in namespaces:
            if not (HOSTS_ROOT / namespace).is_dir():
                state.dirs.append(str(HOSTS_ROOT / namespace))
            state.files.append(str(HOSTS_ROOT / namespace / "hosts"))
        try:
            rundirs.make_run_dir(self.run_dir)
        except FileExistsError:
            raise LabError(f"lab {self.name!r} exists already: meshemu down {self.name} "
                           f"(or meshemu cleanup {self.name})") from None
        write_state(state)
        try:
            arptable.update()
            # Compact: indented, json.dumps falls back to its pure-Python encoder (0.3 s for 1000 nodes).
            (self.run_dir / LAB_FILE).write_text(json.dumps(self.config))
            self._start_medium(program)
            # Written while the medium makes the namespaces: nothing runs in them before it is ready.
            self._write_hosts_files(namespaces)
            self.ready = self._wait_ready(timeout if timeout is not None else 20.0 + 0.05 * len(self.nodes))
            self.backend.wait_attached(self, timeout)
            with updating(self.run_dir) as current:
                for namespace in namespaces:
                    inode = procs.netns_inode(NETNS_DIR / namespace)
                    if inode is not None:
                        current.netns_inodes[namespace] = inode
            routing.start(self)
            queueing.start(self)
        except BaseException:
            self.down()
            raise
        return self

    def down(self) -> list[str]:
        """Stop and remove everything of the lab; what was removed."""
        report = teardown(self.run_dir)
        if self._medium is not None:
            self._medium.wait()  # reap it (it is gone by now)
            self._medium = None
        for process in self._spawned:
            process.poll()  # reaps it if it exited
        self._spawned.clear()
        self.ready = None
        return report

    def _check_free(self, namespaces: list[str]) -> None:
        for namespace in namespaces:
            if (NETNS_DIR / namespace).exists():
                raise LabError(f"network namespace {namespace} exists already (left over? meshemu cleanup {self.name})")
            if (HOSTS_ROOT / namespace / "hosts").exists():
                raise LabError(f"{HOSTS_ROOT / namespace / 'hosts'} exists already and is not ours")

    def _write_hosts_files(self, namespaces: list[str]) -> None:
        """/etc/netns/<ns>/hosts: `ip netns exec` shows it as /etc/hosts, so
        every node resolves every node's name. Every node's is a hard link to
        the first one: a 1000-node lab writes 30 KB once, not 30 MB in 1000
        new files."""
        lines = ["127.0.0.1\tlocalhost"]
        lines += [f"{node.ip}\t{node.name}\t{node.netns}" for node in self.nodes.values()]
        content = "\n".join(lines) + "\n"
        HOSTS_ROOT.mkdir(exist_ok=True)
        first: Path | None = None
        for namespace in namespaces:
            directory = HOSTS_ROOT / namespace
            directory.mkdir(exist_ok=True)
            path = directory / "hosts"
            if first is None:
                path.write_text(content)
                first = path
            else:
                os.link(first, path)

    def _start_medium(self, program: Path) -> None:
        argv = self.backend.medium_argv(program, self.run_dir / LAB_FILE)
        with open(self.run_dir / MEDIUM_OUT, "wb") as out, open(self.run_dir / MEDIUM_ERR, "wb") as err:
            # A session of its own: the lab outlives the command that started it.
            self._medium = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                            start_new_session=True)
        started = procs.start_time(self._medium.pid)
        if started is not None:
            record_process(self.run_dir, ProcessRecord(self._medium.pid, started, "medium", None, argv))

    def _wait_ready(self, timeout: float) -> dict[str, Any]:
        assert self._medium is not None
        deadline = time.monotonic() + timeout
        seen_size = 0
        while True:
            # Read again only once the medium wrote more: the ready line of a
            # large lab is megabytes (its links), its bring-up seconds.
            size = _file_size(self.run_dir / MEDIUM_OUT)
            if size != seen_size:
                seen_size = size
                ready = self._read_ready()
                if ready is not None:
                    return ready
            status = self._medium.poll()
            if status is not None:
                raise LabError(f"the medium exited with status {status} while bringing up lab {self.name!r}: "
                               f"{self._medium_stderr()}")
            if time.monotonic() > deadline:
                raise LabError(f"the medium was not ready after {timeout:.0f} s: {self._medium_stderr()}")
            time.sleep(0.005)

    def _read_ready(self) -> dict[str, Any] | None:
        try:
            text = (self.run_dir / MEDIUM_OUT).read_text(errors="replace")
        except FileNotFoundError:
            return None
        # Complete lines only: the file may be read while the line is written.
        for line in text.split("\n")[:-1]:
            try:
                message = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(message, dict) and message.get("ready") is True:
                return message
        return None

    def _medium_stderr(self) -> str:
        try:
            text = (self.run_dir / MEDIUM_ERR).read_text(errors="replace").strip()
        except FileNotFoundError:
            text = ""
        return text[-2000:] or "(nothing on its stderr)"

    # --- the control socket ---

    def control(self, op: str, **fields: Any) -> dict[str, Any]:
        return medium.ControlClient(self.run_dir / CONTROL_SOCKET).request(op, **fields)

    def status(self) -> dict[str, Any]:
        return self.control("status")

    def stats(self, node: str | None = None, *, peers: bool = True) -> dict[str, Any]:
        """Radio counters: {node name: {counter: value, ..., peers: [...]}}
        (`peers=False`: the counters alone, far cheaper for a large lab)."""
        if node is not None:
            self[node]  # a clear error for an unknown name
            return self.control("stats", node=node, peers=peers)["nodes"]
        return self.control("stats", peers=peers)["nodes"]

    def kernel_counters(self) -> dict[str, kernelstats.Counters]:
        """Each node's kernel counters, {node name: {MIB group: {counter:
        value}}}, the non-zero ones (`meshemu.kernelstats`)."""
        return kernelstats.read({node.name: node.netns for node in self})

    def positions(self) -> dict[str, list[float]]:
        return self.control("positions")["nodes"]

    def links(self) -> dict[str, Any]:
        """Who hears whom now (as `meshemu-medium links`)."""
        return self.control("links")

    def move(self, node: str, x: float, y: float, z: float | None = None) -> None:
        """Teleport a node (its mobility stops)."""
        self[node]
        if z is None:
            z = self.positions()[node][2]
        self.control("move", node=node, position=[float(x), float(y), float(z)])

    def resume_mobility(self, from_ns: int) -> None:
        """Every paused node goes on from model time `from_ns`, standing until then."""
        self.control("mobility", node=None, run=True, from_ns=from_ns)

    def capture(self, path: str | Path | None, run: bool = True) -> None:
        """Air capture (radiotap + 802.11) into a pcap file, on or off."""
        fields: dict[str, Any] = {"run": run}
        if path is not None:
            fields["path"] = str(Path(path).resolve())
        self.control("capture", **fields)


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _summary(names: list[str], limit: int = 10) -> str:
    return ", ".join(names[:limit]) + (f", ... ({len(names)} in all)" if len(names) > limit else "")
