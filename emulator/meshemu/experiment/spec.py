"""The user syntax of experiment files, as strict pydantic models.

An experiment file extends the sim-file syntax (simfile.py): a topology (a
file or inline, with its radio, mobility and routing), `mac`, `duration`,
`warmup`, seeds and a sweep; plus the `traffic` that real programs generate
in a lab, what to `measure`, and `sysctl` settings for every node. Checks
that need the resolved topology (node names, pairs, hop counts) are in
plan.py.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Union

from pydantic import BeforeValidator, Field, model_validator

from ..schema import Duration, PositiveDuration, PositiveRate, PositiveSize, RunFileSpec, StrictModel

NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")
# Namespace-local kernel settings only: net.* is per network namespace.
SYSCTL_KEY = re.compile(r"^net\.[a-z0-9_]+(\.[a-z0-9_-]+)+$")
# One IPv4 packet per datagram on the labs' 1500-byte MTU (20 IP + 8 UDP).
MAX_DATAGRAM = 1472
# The meshemu-udp header.
UDP_HEADER = 28
# The TFRC tool's header.
TFRC_HEADER = 36


def _flow_name(value: Any) -> str:
    if not isinstance(value, str) or not NAME.match(value):
        raise ValueError(f"bad flow name {value!r}: a letter, then up to 31 of A-Z a-z 0-9 _ -")
    return value


FlowName = Annotated[str, BeforeValidator(_flow_name)]


def _on_off(value: Any) -> bool:
    """YAML 1.2 reads on/off as text: accept them besides true/false."""
    if isinstance(value, bool):
        return value
    if value in ("on", "off"):
        return value == "on"
    raise ValueError("expected on or off (or true/false)")


OnOff = Annotated[bool, BeforeValidator(_on_off)]
Port = Annotated[int, Field(ge=1024, le=65535)]


class Endpoints(StrictModel):
    """Who talks to whom: `src`/`dst` node names (or `first`, `last`,
    `random`; `src: all` makes one flow from every other node to dst), or a
    `pair` chosen from the run's seed."""

    name: FlowName | None = None
    src: str | None = None
    dst: str | None = None
    pair: Literal["random", "farthest"] | None = None
    start: Duration = 0
    stop: Duration | None = None
    port: Port | None = None

    @model_validator(mode="after")
    def _endpoints(self) -> "Endpoints":
        if self.pair is not None and (self.src is not None or self.dst is not None):
            raise ValueError("give src and dst, or pair, not both")
        if self.pair is None and (self.src is None or self.dst is None):
            raise ValueError("give src and dst (node names or random), or pair: random | farthest")
        if self.src == "all" and self.dst in ("all", "random"):
            raise ValueError("src: all needs one dst (a node name, first or last)")
        if self.dst == "all":
            raise ValueError("dst cannot be all (src: all makes one flow from every other node to dst)")
        if self.stop is not None and self.stop <= self.start:
            raise ValueError("stop must be after start")
        return self


class TcpTraffic(Endpoints):
    """A bulk TCP transfer with iperf3 (server in dst, client in src)."""

    kind: Literal["tcp"]
    cc: str | None = None  # checked against the kernel's list in plan.py
    mss: PositiveSize | None = None
    window: PositiveSize | None = None
    sack: bool | None = None
    delayed_ack: OnOff | None = None
    min_rto: PositiveDuration | None = None  # the sender's: net.ipv4.tcp_rto_min_us there, ns-2's minrto_
    timestamps: bool | None = None  # net.ipv4.tcp_timestamps at both ends, ns-2's timestamps_
    # Which ns-2 sender runs the flow under --driver ns2: its classic agents (Reno, Newreno, Vegas, Sack1)
    # or Agent/TCP/Linux (Linux 2.6's congestion controls); labs always run their kernel's TCP.
    ns2_agent: Literal["classic", "linux"] | None = None


class UdpTraffic(Endpoints):
    """Constant bit rate UDP: meshemu-udp (default) or iperf3 -u."""

    kind: Literal["udp"]
    rate: PositiveRate
    packet: PositiveSize  # UDP payload bytes, as iperf3 -l
    tool: Literal["meshemu-udp", "iperf3"] = "meshemu-udp"

    @model_validator(mode="after")
    def _packet(self) -> "UdpTraffic":
        smallest = UDP_HEADER if self.tool == "meshemu-udp" else 16
        if not smallest <= self.packet <= MAX_DATAGRAM:
            raise ValueError(f"packet must be {smallest} to {MAX_DATAGRAM} B (one IPv4 packet on a 1500-byte MTU)")
        return self


class Contenders(StrictModel):
    """RE-TFRC's delay model: contending nodes of the single-hop networks at
    the chain's two ends and in its middle (the tool's defaults: 3 and 4)."""

    end: Annotated[int, Field(ge=1, le=100)] | None = None
    middle: Annotated[int, Field(ge=1, le=100)] | None = None


class TfrcTraffic(Endpoints):
    """A TFRC or RE-TFRC flow with the tfrc tool (transport/tfrc). `hops`,
    `phy`, `contenders`, `max_cut` and `tolerance` set RE-TFRC's model and controller; a
    plain TFRC flow ignores them, so a sweep over `mode` keeps its pairs."""

    kind: Literal["tfrc"]
    mode: Literal["tfrc", "re-tfrc"] = "tfrc"
    packet: PositiveSize = 1000
    rate_cap: PositiveRate | None = None
    hops: Annotated[int, Field(ge=1, le=255)] | None = None  # default: from the received TTL
    phy: Literal["dsss", "fhss"] | None = None
    contenders: Contenders | None = None
    max_cut: Annotated[float, Field(gt=0.0, le=1.0)] | None = None
    tolerance: Annotated[float, Field(ge=0.0, lt=1.0)] | None = None

    @model_validator(mode="after")
    def _packet(self) -> "TfrcTraffic":
        if not TFRC_HEADER <= self.packet <= MAX_DATAGRAM:
            raise ValueError(f"packet must be {TFRC_HEADER} to {MAX_DATAGRAM} B")
        return self


class CommandTraffic(StrictModel):
    """Any program in a node, from start until it exits or until stop."""

    kind: Literal["command"]
    name: FlowName | None = None
    node: str
    argv: Annotated[list[str], Field(min_length=1)]
    start: Duration = 0
    stop: Duration | None = None

    @model_validator(mode="after")
    def _times(self) -> "CommandTraffic":
        if self.stop is not None and self.stop <= self.start:
            raise ValueError("stop must be after start")
        return self


Traffic = Annotated[Union[TcpTraffic, UdpTraffic, TfrcTraffic, CommandTraffic], Field(discriminator="kind")]


class Measure(StrictModel):
    tcp_trace: PositiveDuration = 100_000_000  # tcp_info sampling interval of TCP senders
    stats_interval: PositiveDuration | None = None  # radio counters over time (besides warm-up and end)
    capture: bool = False  # tcpdump -s 96 on every TCP sender's wlan0: data/ACK events
    sim_reference: bool = False  # also run the UDP flows through the sim driver
    sim_seeds: Annotated[int, Field(ge=1, le=100)] = 5  # the sim reference's seeds: the run's seed and the next ones
    drain: Duration = 2_000_000_000  # receivers listen this long after the run for packets in flight
    view: PositiveDuration | None = None  # a recording for `meshemu view RESULTS --run ID`, a frame this often


def _sysctl(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ValueError("expected a mapping such as {net.ipv4.tcp_ecn: 1}")
    settings = {}
    for key, setting in value.items():
        if not isinstance(key, str) or not SYSCTL_KEY.match(key):
            raise ValueError(f"bad sysctl {key!r}: only net.* settings, which are per network namespace")
        if isinstance(setting, bool) or not isinstance(setting, (str, int)) or "\n" in str(setting):
            raise ValueError(f"sysctl {key}: expected a number or a word, got {setting!r}")
        settings[key] = str(setting)
    return settings


Sysctl = Annotated[dict[str, str], BeforeValidator(_sysctl)]


class ExperimentSpec(RunFileSpec):
    traffic: Annotated[list[Traffic], Field(min_length=1)]
    measure: Measure = Measure()
    sysctl: Sysctl | None = None
