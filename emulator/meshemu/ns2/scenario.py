"""A planned run -> an ns-2.35 Tcl scenario.

The scenario is self-contained: in its directory, `ns scenario.tcl` writes
`trace.tr` (ns-2's old wireless trace format: every agent, routing, queue
and MAC event) and `samples.txt` (the flows' agents and ports, agent
variables sampled with `$ns at` at the measurement windows' edges, and the
model time reached). support.py has refused what ns-2 cannot do, so every
value here has an ns-2 counterpart:

- radio: class defaults set before `new Simulator` (every node gets the same
  radio): Phy/WirelessPhy Pt_, RXThresh_, CSThresh_ (W), CPThresh_ (a power
  ratio), freq_, L_ (system loss, a ratio); Antenna/OmniAntenna Z_ (height);
  Mac/802_11 dataRate_, basicRate_, retry limits, CWMin_/CWMax_, SlotTime_,
  SIFS_ and the PLCP preamble and header. Antenna gains are folded into Pt_
  (ns-2's channel finds receivers with unity gains, and gains only ever
  multiply Pt_). RTSThreshold_ is shifted by the difference between ns-2's
  data frame overhead (PLCP header bytes + 34) and the model's (36 B), so the
  same IP packets go with RTS/CTS; a short preamble is 72 bits plus a
  24-bit-long header at 1 Mbit/s: 96 us, as 802.11b's 48 bits at 2 Mbit/s.
- propagation: two_ray_ground -> Propagation/TwoRayGround, free_space ->
  FreeSpace, log_distance and shadowing -> Shadowing (std_db_ 0 for
  log_distance; its own stream seeded from the run's seed).
- routing: aodv, dsr, dsdv -> ns-2's agents (CMUPriQueue for DSR, as ns-2
  requires; Queue/DropTail/PriQueue otherwise, routing packets first when
  queue_priority); static and none -> DumbAgent (single-hop flows).
- nodes: the resolved positions (shifted so that no coordinate is negative:
  ns-2's topography starts at 0), and every movement as `setdest` legs from
  the model's own trajectories (`meshemu-medium mobility`).
- udp: Agent/UDP + Application/Traffic/CBR -> Agent/LossMonitor. ns-2's UDP
  agent adds no UDP header, so each packet carries the payload + 8 bytes;
  the routing agents (AODV, DSDV, DSR) add the 20-byte IP header, DumbAgent
  does not, so there the packet carries it too: IP packets are as long as
  the lab's (payload + 28) under every agent. The agent's packetSize_ is as
  large, so it never splits the data.
- tcp: one bulk FTP transfer over Agent/TCP/Reno, Newreno, Vegas or Sack1
  (cc: sack, or reno with sack: true) to TCPSink (Sack1 for SACK, DelAck
  variants for delayed ACKs; unset: ns-2's defaults, no SACK and an ACK per
  segment, where a lab's kernel has both on); with ns2_agent: linux, over
  Agent/TCP/Linux running Linux 2.6's congestion control `cc` (select_ca)
  to TCPSink/Sack1 unless sack: false (the agent is built for a SACK
  receiver, and a lab's kernel has SACK on); packetSize_
  is the MSS (default 1460, the lab's on a 1500-byte MTU: ns-2's 40-byte
  TCP/IP header makes 1500-byte packets), window_ the window in packets
  where given (else ns-2's 20), minrto_ the flow's min_rto and timestamps_
  its timestamps where given (else ns-2's 0.2 s, and no timestamps).
- every random choice from the run's seed: `$defaultRNG seed` (MAC backoff,
  routing jitter) and the shadowing stream.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..experiment.runs import Flow, Run

SCENARIO_FILE = "scenario.tcl"
TRACE_FILE = "trace.tr"
SAMPLES_FILE = "samples.txt"

TCP_AGENTS = {"reno": "Agent/TCP/Reno", "newreno": "Agent/TCP/Newreno", "vegas": "Agent/TCP/Vegas",
              "sack": "Agent/TCP/Sack1"}
SACK_AGENT = "Agent/TCP/Sack1"
LINUX_AGENT = "Agent/TCP/Linux"
# The Linux congestion controls Debian's ns-2.35 builds into Agent/TCP/Linux
# (its tcp/linux/src; besides them only naive_reno, ns-2's own). `select_ca`
# of another name falls back to Reno with only a line in ns-2's output, so
# names are checked when the file is planned.
LINUX_CCS = ("reno", "cubic", "bic", "highspeed", "htcp", "hybla", "illinois", "lp", "scalable", "vegas", "veno",
             "westwood", "yeah", "compound")
# What ns-2 prints when `select_ca` does not know the name.
UNKNOWN_CC = "Error: do not find"
# Congestion controls that ns-2's SACK agent is with SACK on: Sack1 is Reno with SACK.
SACK_CCS = ("reno", "sack")
# The lab's MSS on its 1500-byte MTU.
DEFAULT_MSS = 1460
# The UDP header ns-2's Agent/UDP leaves out, carried as payload instead.
UDP_HEADER = 8
# The IP header ns-2's routing agents add to the packets their node sends
# (TCP's excepted, whose agent counts it); DumbAgent adds none.
IP_HEADER = 20
# ns-2's TCP/IP header (Agent/TCP tcpip_base_hdr_size_).
TCP_IP_HEADER = 40
ROUTING_AGENTS = {"aodv": "AODV", "dsr": "DSR", "dsdv": "DSDV", "static": "DumbAgent", "none": "DumbAgent"}
# The model's data frame overhead around an IP packet: MAC header, LLC/SNAP, FCS.
MODEL_DATA_OVERHEAD = 24 + 8 + 4
# ns-2's: hdr_mac802_11 up to its body (30 B) and the FCS, besides the PLCP bytes.
NS2_DATA_OVERHEAD = 30 + 4
# ns-2's RNG takes seeds 1 ... 2^31 - 2 (0 would seed from the clock).
NS2_SEED_LIMIT = 2**31 - 1
# Agent/TCP's clock granularity (ns-2's default, set explicitly): srtt_ counts eighths of it.
TCP_TICK_S = 0.01
# Variables of a TCP agent sampled at the window's edges and in between.
TCP_VARIABLES = ("ack_", "t_seqno_", "ndatapack_", "ndatabytes_", "nrexmitpack_", "nrexmitbytes_", "nrexmit_",
                 "cwnd_", "srtt_")
SINK_VARIABLES = ("npkts_", "bytes_")
NS = 1_000_000_000


@dataclass(frozen=True)
class FlowSetup:
    """How one traffic flow runs in ns-2."""

    name: str
    kind: str  # tcp | udp
    src: int  # node indices (ns-2 addresses)
    dst: int
    agent: str
    sink: str
    payload: int  # UDP payload or TCP MSS, bytes
    packet: int  # what the agent sends per packet (ns-2 packetSize_)
    window: int | None  # TCP window_, packets; None: ns-2's default
    window_ns: tuple[int, int]  # [max(warmup, start), stop]
    min_rto_s: float | None = None  # TCP minrto_; None: ns-2's default
    timestamps: bool | None = None  # TCP timestamps_; None: ns-2's default (off)
    congestion: str | None = None  # Agent/TCP/Linux's congestion control (select_ca)

    def as_json(self) -> dict[str, Any]:
        return {"agent": self.agent, "sink": self.sink, "packet_size": self.packet,
                **({"congestion": self.congestion} if self.congestion is not None else {}),
                **({"window": self.window} if self.kind == "tcp" else {}),
                **({"min_rto": self.min_rto_s} if self.min_rto_s is not None else {}),
                **({"timestamps": self.timestamps} if self.timestamps is not None else {})}


@dataclass(frozen=True)
class Scenario:
    tcl: str
    flows: tuple[FlowSetup, ...]
    end_ns: int  # model time the scenario runs to
    facts: dict[str, Any]  # what the record's `ns2` section says about the translation


def ns2_seed(seed: int) -> int:
    """The run's seed as a seed ns-2's RNG accepts: itself where it can be,
    else a hash of it (0 and seeds of 2^31 - 1 or more)."""
    if 1 <= seed < NS2_SEED_LIMIT:
        return seed
    digest = hashlib.sha256(f"meshemu-ns2-seed:{seed}".encode()).digest()
    return 1 + int.from_bytes(digest[:8], "big") % (NS2_SEED_LIMIT - 1)


def _number(value: float) -> str:
    """A Tcl number that reads back as the same float."""
    return repr(float(value))


def _watts(dbm: float) -> float:
    """dBm -> W, to 12 significant digits: a profile's 3.652e-10W comes back
    as written, not as 3.6520000000000025e-10 from its trip through dBm."""
    return float(f"{10 ** ((dbm - 30.0) / 10.0):.12g}")


def _ratio(db: float) -> float:
    return float(f"{10 ** (db / 10.0):.12g}")


def plcp(radio: dict[str, Any]) -> tuple[int, int]:
    """PreambleLength_ and PLCPHeaderLength_ (bits at 1 Mbit/s) for the
    radio's preamble: long 144 + 48 (192 us); short 72 + 24 (96 us, as 72
    bits at 1 Mbit/s and 48 at 2 Mbit/s)."""
    return (144, 48) if radio["preamble"] == "long" else (72, 24)


def rts_threshold(radio: dict[str, Any]) -> int:
    """ns-2's RTSThreshold_ for the model's rts_threshold_bytes: the model
    uses RTS/CTS when MPDU = IP + 36 > threshold; ns-2 when its frame size,
    IP + PLCP bytes + 34, >= RTSThreshold_."""
    threshold = radio["rts_threshold_bytes"]
    if threshold == 0:
        return 0
    plcp_bytes = sum(plcp(radio)) // 8
    return min(threshold + plcp_bytes + NS2_DATA_OVERHEAD - MODEL_DATA_OVERHEAD + 1, NS2_SEED_LIMIT)


def _propagation(radio: dict[str, Any], seed: int) -> tuple[list[str], dict[str, Any]]:
    model = radio["propagation"]
    if model["model"] in ("two_ray_ground", "free_space"):
        name = "Propagation/TwoRayGround" if model["model"] == "two_ray_ground" else "Propagation/FreeSpace"
        return [f"set propagation [new {name}]"], {"propagation": name}
    sigma = model.get("sigma_db", 0.0)
    lines = ["set propagation [new Propagation/Shadowing]",
             f"$propagation set pathlossExp_ {_number(model['exponent'])}",
             f"$propagation set std_db_ {_number(sigma)}",
             f"$propagation set dist0_ {_number(model['reference_distance_m'])}",
             f"$propagation seed raw {seed}"]
    return lines, {"propagation": "Propagation/Shadowing", "shadowing_seed": seed}


def _radio_defaults(radio: dict[str, Any], routing: str) -> list[str]:
    preamble, header = plcp(radio)
    gain_db = 2 * radio["antenna_gain_dbi"]  # transmitter's and receiver's, folded into Pt_
    queue = "CMUPriQueue" if routing == "dsr" else "Queue/DropTail/PriQueue"
    lines = [
        f"# Every node's radio, as class defaults before `new Simulator` ({radio['phy']}, "
        f"{radio['data_rate_bps'] / 1e6:g}/{radio['basic_rate_bps'] / 1e6:g} Mbit/s).",
        f"Phy/WirelessPhy set Pt_ {_number(_watts(radio['tx_power_dbm'] + gain_db))} ;# "
        f"{radio['tx_power_dbm']:.4f} dBm" + (f" + 2 x {radio['antenna_gain_dbi']:g} dBi antenna gain" if gain_db else ""),
        f"Phy/WirelessPhy set RXThresh_ {_number(_watts(radio['rx_threshold_dbm']))} ;# {radio['rx_threshold_dbm']:.4f} dBm",
        f"Phy/WirelessPhy set CSThresh_ {_number(_watts(radio['cs_threshold_dbm']))} ;# {radio['cs_threshold_dbm']:.4f} dBm",
        f"Phy/WirelessPhy set CPThresh_ {_number(_ratio(radio['capture_threshold_db']))} ;# "
        f"{radio['capture_threshold_db']:g} dB",
        f"Phy/WirelessPhy set freq_ {_number(radio['frequency_hz'])}",
        f"Phy/WirelessPhy set L_ {_number(_ratio(radio['system_loss_db']))} ;# {radio['system_loss_db']:g} dB",
        f"Antenna/OmniAntenna set Z_ {_number(radio['antenna_height_m'])}",
        "Antenna/OmniAntenna set Gt_ 1.0",
        "Antenna/OmniAntenna set Gr_ 1.0",
        f"Mac/802_11 set dataRate_ {radio['data_rate_bps']}",
        f"Mac/802_11 set basicRate_ {radio['basic_rate_bps']}",
        f"Mac/802_11 set RTSThreshold_ {rts_threshold(radio)} ;# the model's {radio['rts_threshold_bytes']} B "
        f"(ns-2 counts the PLCP header and 34 B, the model 36 B)",
        f"Mac/802_11 set ShortRetryLimit_ {radio['short_retry_limit']}",
        f"Mac/802_11 set LongRetryLimit_ {radio['long_retry_limit']}",
        f"Mac/802_11 set CWMin_ {radio['cw_min']}",
        f"Mac/802_11 set CWMax_ {radio['cw_max']}",
        f"Mac/802_11 set SlotTime_ {_number(radio['slot_ns'] / NS)}",
        f"Mac/802_11 set SIFS_ {_number(radio['sifs_ns'] / NS)}",
        f"Mac/802_11 set PreambleLength_ {preamble} ;# {radio['preamble']} preamble",
        f"Mac/802_11 set PLCPHeaderLength_ {header}",
        "Mac/802_11 set PLCPDataRate_ 1000000",
        f"Agent/TCP set tcpTick_ {TCP_TICK_S}",
    ]
    if queue == "Queue/DropTail/PriQueue":
        lines.append(f"Queue/DropTail/PriQueue set Prefer_Routing_Protocols {int(radio['queue_priority'])}")
    return lines


def _placement(trajectories: list[list[dict[str, Any]]]) -> tuple[tuple[float, float], tuple[int, int]]:
    """The shift that makes every coordinate non-negative, and the
    topography's size after it."""
    points = [point["position"] for trajectory in trajectories for point in trajectory]
    low = (min(p[0] for p in points), min(p[1] for p in points))
    shift = (-low[0] if low[0] < 0 else 0.0, -low[1] if low[1] < 0 else 0.0)
    size = (math.ceil(max(p[0] for p in points) + shift[0]) + 1, math.ceil(max(p[1] for p in points) + shift[1]) + 1)
    return shift, size


def _movement(index: int, trajectory: list[dict[str, Any]], shift: tuple[float, float], end_ns: int) -> list[str]:
    """The straight legs of a trajectory as setdest commands at their start
    times (pauses need none: a node stops at its destination)."""
    lines = []
    for here, there in zip(trajectory, trajectory[1:]):
        if here["t_ns"] >= end_ns:
            break
        distance = math.dist(here["position"][:2], there["position"][:2])
        seconds = (there["t_ns"] - here["t_ns"]) / NS
        if distance == 0 or seconds <= 0:
            continue
        x, y = there["position"][0] + shift[0], there["position"][1] + shift[1]
        lines.append(f'$ns at {_number(here["t_ns"] / NS)} "$node_({index}) setdest {_number(x)} {_number(y)} '
                     f'{_number(distance / seconds)}"')
    return lines


def _flow_setup(run: "Run", flow: "Flow", names: list[str], routing_agent: str) -> FlowSetup:
    window_ns = (max(run.warmup_ns, flow.start_ns), flow.stop_ns)
    src, dst = names.index(flow.src), names.index(flow.dst)
    if flow.kind == "udp":
        payload = flow.options["packet"]
        headers = UDP_HEADER + (IP_HEADER if routing_agent == "DumbAgent" else 0)
        return FlowSetup(flow.name, "udp", src, dst, "Agent/UDP", "Agent/LossMonitor", payload,
                         payload + headers, None, window_ns)
    options = flow.options
    if options.get("ns2_agent") == "linux":
        agent, congestion, sack = LINUX_AGENT, options["cc"], options["sack"] is not False
    else:
        agent, congestion = SACK_AGENT if options["sack"] else TCP_AGENTS[options["cc"]], None
        sack = agent == SACK_AGENT
    sink = "Agent/TCPSink" + ("/Sack1" if sack else "") + ("/DelAck" if options["delayed_ack"] else "")
    mss = options["mss"] or DEFAULT_MSS
    window = max(1, round(options["window"] / mss)) if options["window"] else None
    min_rto = options["min_rto"] / NS if "min_rto" in options else None
    return FlowSetup(flow.name, "tcp", src, dst, agent, sink, mss, mss, window, window_ns, min_rto,
                     options.get("timestamps"), congestion)


def _flow_lines(run: "Run", setup: FlowSetup, flow: "Flow") -> list[str]:
    name = setup.name
    what = (f"{flow.options['packet']} B payload at {flow.options['rate_bps']} bit/s of payload" if setup.kind == "udp"
            else f"{flow.options['cc']}, MSS {setup.payload} B")
    lines = [f"# flow {name}: {setup.kind} {flow.src} -> {flow.dst}, {what}, "
             f"{flow.start_ns / NS:g} s to {flow.stop_ns / NS:g} s",
             f"set src_({name}) [new {setup.agent}]",
             f"$src_({name}) set packetSize_ {setup.packet}"]
    if setup.congestion is not None:
        lines.append(f"$src_({name}) select_ca {setup.congestion}")
    if setup.window is not None:
        lines.append(f"$src_({name}) set window_ {setup.window}")
    if setup.min_rto_s is not None:
        lines.append(f"$src_({name}) set minrto_ {_number(setup.min_rto_s)}")
    if setup.timestamps is not None:
        lines.append(f"$src_({name}) set timestamps_ {'true' if setup.timestamps else 'false'}")
    lines += [f"$ns attach-agent $node_({setup.src}) $src_({name})",
              f"set dst_({name}) [new {setup.sink}]",
              f"$ns attach-agent $node_({setup.dst}) $dst_({name})",
              f"$ns connect $src_({name}) $dst_({name})"]
    if setup.kind == "udp":
        # CBR's interval is packetSize_ * 8 / rate_: the lab's payload rate at the longer packets.
        rate = flow.options["rate_bps"] * setup.packet / setup.payload
        lines += [f"set app_({name}) [new Application/Traffic/CBR]",
                  f"$app_({name}) set packetSize_ {setup.packet}",
                  f"$app_({name}) set rate_ {_number(rate)}"]
    else:
        lines.append(f"set app_({name}) [new Application/FTP]")
    lines += [f"$app_({name}) attach-agent $src_({name})",
              f'$ns at {_number(flow.start_ns / NS)} "$app_({name}) start"',
              f'$ns at {_number(flow.stop_ns / NS)} "$app_({name}) stop"',
              f'puts $samples "flow {name} [$src_({name}) set agent_addr_] [$src_({name}) set agent_port_] '
              f'[$dst_({name}) set agent_addr_] [$dst_({name}) set agent_port_]"']
    start, end = setup.window_ns
    if setup.kind == "udp":
        times = [start, end]
        sampler = "sample_sink"
    else:
        step = run.measure["tcp_trace"]
        times = sorted({*range(start, end, step), end})
        sampler = "sample_tcp"
    lines += [f'$ns at {_number(t / NS)} "{sampler} {name}"' for t in times]
    return lines


def _sampler(name: str, role: str, variables: tuple[str, ...]) -> list[str]:
    values = " ".join(f"{variable}=[${role}_($flow) set {variable}]" for variable in variables)
    return [f"proc {name} {{flow}} {{",
            f"    global ns samples {role}_",
            f'    puts $samples "{name.removeprefix("sample_")} $flow [format %.9f [$ns now]] {values}"',
            "}"]


def scenario(run: "Run", trajectories: list[list[dict[str, Any]]], title: str,
             replicate: int | None = None) -> Scenario:
    """The Tcl scenario of `run`; `trajectories[i]` is node i's path
    (`meshemu-medium mobility`, or its position alone when static).
    `replicate` seeds ns-2's RNG (MAC backoff, routing jitter) in place of
    the run's seed: the same nodes, moves and traffic, another draw of
    ns-2's own randomness (experiments/validation/ns2/replicates.py)."""
    medium = run.topology.medium
    names = [node["name"] for node in medium["nodes"]]
    radio = medium["nodes"][0]["radio"]
    routing = run.topology.routing_choice.name
    seed = ns2_seed(medium["seed"])
    rng_seed = seed if replicate is None else ns2_seed(replicate)
    end_ns = run.duration_ns + run.measure["drain"]
    shift, size = _placement(trajectories)
    propagation, propagation_facts = _propagation(radio, seed)
    flows = [flow for flow in run.flows if flow.kind in ("tcp", "udp")]
    setups = tuple(_flow_setup(run, flow, names, ROUTING_AGENTS[routing]) for flow in flows)
    queue = "CMUPriQueue" if routing == "dsr" else "Queue/DropTail/PriQueue"

    lines = [f"# {' '.join(title.split())}",  # one comment line whatever the swept values hold
             "# Written by meshemu's ns-2 driver (meshemu run FILE --driver ns2). Rerun it by hand here:",
             f"#     ns {SCENARIO_FILE}",
             f"# It writes {TRACE_FILE} (ns-2's trace) and {SAMPLES_FILE} (agent variables at the windows' edges).",
             ""]
    lines += _radio_defaults(radio, routing)
    lines += ["",
              "set ns [new Simulator]",
              f"$defaultRNG seed {rng_seed} ;# the run's seed {medium['seed']}"
              + ("" if replicate is None else f", replicate {replicate}"),
              f"set tracefile [open {TRACE_FILE} w]",
              "$ns trace-all $tracefile",
              f"set samples [open {SAMPLES_FILE} w]",
              "set topography [new Topography]",
              f"$topography load_flatgrid {size[0]} {size[1]}",
              f"create-god {len(names)}",
              "set channel [new Channel/WirelessChannel]"]
    lines += propagation
    lines += [f"$ns node-config -adhocRouting {ROUTING_AGENTS[routing]} -llType LL -macType Mac/802_11 \\",
              f"    -ifqType {queue} -ifqLen {radio['queue_len']} -antType Antenna/OmniAntenna \\",
              "    -propInstance $propagation -phyType Phy/WirelessPhy -channel $channel -topoInstance $topography \\",
              "    -agentTrace ON -routerTrace ON -macTrace ON -movementTrace OFF",
              ""]
    if shift != (0.0, 0.0):
        lines.append(f"# Positions shifted by ({shift[0]:g}, {shift[1]:g}) m: ns-2's topography starts at 0.")
    for index, (name, trajectory) in enumerate(zip(names, trajectories)):
        x, y, z = trajectory[0]["position"]
        lines += [f"set node_({index}) [$ns node] ;# {name}",
                  f"$node_({index}) random-motion 0",
                  f"$node_({index}) set X_ {_number(x + shift[0])}",
                  f"$node_({index}) set Y_ {_number(y + shift[1])}",
                  f"$node_({index}) set Z_ {_number(z)}"]
        lines += _movement(index, trajectory, shift, end_ns)
    lines += [""]
    lines += _sampler("sample_tcp", "src", TCP_VARIABLES)
    lines += _sampler("sample_sink", "dst", SINK_VARIABLES)
    lines += ["proc progress {} {",
              "    global ns samples",
              '    puts $samples "time [format %.9f [$ns now]]"',
              "    flush $samples",
              '    $ns at [expr {[$ns now] + 1.0}] progress',
              "}",
              "proc finish {} {",
              "    global ns tracefile samples",
              "    $ns flush-trace",
              "    close $tracefile",
              '    puts $samples "end [format %.9f [$ns now]]"',
              "    close $samples",
              "    $ns halt",
              "}",
              ""]
    for setup, flow in zip(setups, flows):
        lines += _flow_lines(run, setup, flow) + [""]
    lines += ['$ns at 0.0 "progress"',
              f'$ns at {_number(end_ns / NS)} "finish"',
              "$ns run"]
    facts = {"seed": rng_seed, **({} if replicate is None else {"replicate": replicate}),
             "routing_agent": ROUTING_AGENTS[routing], "queue": queue, **propagation_facts,
             "rts_threshold": rts_threshold(radio), "shift_m": list(shift),
             "flows": {setup.name: setup.as_json() for setup in setups}}
    return Scenario("\n".join(lines) + "\n", setups, end_ns, facts)
