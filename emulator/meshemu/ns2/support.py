"""What the ns-2 driver can run, checked when the file is planned: every
setting ns-2.35 has no equivalent for is refused, naming the key where it is
written, before anything runs (a run that silently left a setting out would
compare different things).

Refused, and why:
- our daemons (routing copas, babeld; queueing by bpd), `command` and
  `tfrc` traffic, `sysctl`: programs and kernel settings of the lab's nodes;
- `backend: hwsim`, `mac: {tdma: ...}`: ns-2.35's Mac/802_11 is DCF only;
- per-link overrides (`links`), a radio `bit_error_rate`, `capture_restart`,
  an `interference_floor` under the carrier-sense threshold, shadowing `per:
  link`, OFDM radios: ns-2's WirelessPhy has no bit errors, captures only a
  frame that starts first, drops every signal under CSThresh (it neither
  adds up nor interferes), draws shadowing per frame and times DSSS frames
  only;
- radios that differ between nodes: ns-2.35's channel computes one
  carrier-sense range for all (WirelessChannel::calcHighestAntennaZ);
- positions off the ground (z != 0): ns-2's two-ray model assumes flat
  ground and its channel finds receivers from the antenna height alone;
- `routing: static`/`none` with a flow of more than one hop: ns-2 has no
  static routes for wireless nodes (DumbAgent reaches neighbours only);
- AODV options other than what Debian's ns-2.35 AODV does (compile-time
  constants, as aodvd's `preset: ns2` has them): link-layer detection, no
  HELLOs, local repair, ...;
- the radio's ns-2 MAC switches (eifs_nav, receive_during_tx,
  responses_need_idle) turned off: ns-2's MAC always behaves so. (The
  radio's retry_drop_flush stands in for ns-2's AODV in a lab: in ns-2 the
  routing agent decides.);
- TCP congestion controls ns-2 has no agent for (bbr, and cubic, westwood,
  ... unless `ns2_agent: linux` runs them in Agent/TCP/Linux; and no `cc` at
  all, which is the kernel's default in a lab);
- lab measurements that add metrics: `measure.capture` (the TCP senders'
  data/ACK events), `measure.sim_reference` (the sim driver's goodput);
  `measure.stats_interval` and `measure.view` only add a time series of a
  lab's counters and a recording for `meshemu view` and are ignored.

Not refused: `topology.arp`. ns-2's ARP is always what `resolve_once` makes
of a lab's (an entry, once resolved, never expires); the default `kernel`
is Linux's own and is where a lab with it may differ (unicast probes of
stale entries), as a lab's TCP is Linux's beside an ns-2 agent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import Problem
from ..source import DataPath, Document
from .scenario import LINUX_AGENT, LINUX_CCS, SACK_AGENT, SACK_CCS, TCP_AGENTS

if TYPE_CHECKING:
    from ..experiment.runs import Flow
    from ..experiment.spec import ExperimentSpec
    from ..topology import Topology

# Debian's ns-2.35 AODV, as aodvd's `preset: ns2` describes it (routing/aodv,
# Config::ns2; routing/aodv/NS2.md), in the units of choices.routing_choice_of's
# options: what `routing: {aodv: {...}}` may ask of it. Its settings are
# compile-time constants of aodv.h and aodv.cc. tests/test_ns2.py checks this
# table against `aodvd --print-config` with the preset.
NS2_AODV = {
    "preset": ("preset", "ns2", "is what preset: ns2 describes"),
    "hello_interval_ms": ("hello_interval", 0, "sends no HELLOs (AODV_LINK_LAYER_DETECTION): 0s"),
    "link_layer_feedback": ("link_layer_feedback", True, "detects broken links from the MAC (true)"),
    "link_failures": ("link_failures", "data", "hears only of the failed packets it routed (data)"),
    "local_repair": ("local_repair", True, "repairs routes locally (true)"),
    "local_repair_rule": ("local_repair_rule", "ns2", "repairs by its own rule (ns2)"),
    "active_route_timeout_ms": ("active_route_timeout", 10_000, "has ACTIVE_ROUTE_TIMEOUT 10s"),
    "rreq_retries": ("rreq_retries", 3, "has RREQ_RETRIES 3"),
    "rreq_backoff": ("rreq_backoff", "linear", "waits linearly longer after each network-wide RREQ (linear)"),
    "expanding_ring_search": ("expanding_ring_search", True, "searches with an expanding ring (true)"),
    "ttl_start": ("ttl_start", 30, "starts a new destination's search network-wide: 30 (aodv.h's TTL_START is "
                                   "never used)"),
    "ttl_increment": ("ttl_increment", 2, "has TTL_INCREMENT 2"),
    "ttl_threshold": ("ttl_threshold", 7, "has TTL_THRESHOLD 7"),
    "ring_limit": ("ring_limit", "ns2", "searches network-wide once the last ring reached TTL_THRESHOLD (ns2)"),
    "measured_hop_time": ("measured_hop_time", True, "waits by the measured latency per hop, PerHopTime (true)"),
    "net_diameter": ("net_diameter", 30, "has NETWORK_DIAMETER 30"),
    "node_traversal_time_ms": ("node_traversal_time", 30, "has NODE_TRAVERSAL_TIME 30ms"),
    "timeout_buffer": ("timeout_buffer", 0, "waits for a ring without TIMEOUT_BUFFER: 0"),
    "intermediate_replies": ("intermediate_replies", True, "lets intermediate nodes reply (true)"),
    "gratuitous_rrep": ("gratuitous_rrep", False, "sends no gratuitous RREPs (false)"),
    "rrep_ack": ("rrep_ack", False, "asks for no RREP-ACKs (false)"),
    "rerr_broadcast": ("rerr_broadcast", True, "broadcasts every RERR (true)"),
    "rreq_rate_limit": ("rreq_rate_limit", 10_000, "has no RREQ rate limit (aodvd's largest, 10000)"),
    "rerr_rate_limit": ("rerr_rate_limit", 10_000, "has no RERR rate limit (aodvd's largest, 10000)"),
    "broadcast_jitter_ms": ("broadcast_jitter", 10, "jitters broadcasts by up to 10ms"),
    "flush_on_break": ("flush_on_break", True, "drops what is queued for a neighbour whose routes went down (true)"),
    "relay_every_reply": ("relay_every_reply", False, "relays a reply only where it is news (false)"),
    "renumber_replies": ("renumber_replies", True, "answers with max(own, asked) + 1 (true)"),
    "precursor_rule": ("precursor_rule", "ns2", "lists precursors on routes towards a reply's destination only "
                                                "(ns2)"),
    "release_spacing_ms": ("release_spacing", 10, "releases held packets 10ms apart after a reply (ARP_DELAY)"),
}
# aodvd options that change nothing in ns-2's AODV: HELLO bookkeeping (it
# sends none) and how aodvd polls the lab's medium.
NS2_AODV_MOOT = {"allowed_hello_loss", "acked_frames_alive", "link_feedback_poll_ms"}
# ns-2.35's MAC departs from the standard in these ways and cannot be made
# not to (emulator/README.md section 1; ns2-wavelan turns them on).
NS2_MAC = {"eifs_nav": "uses EIFS as a NAV", "receive_during_tx": "lets a frame arriving while it sends take "
           "the receiver", "responses_need_idle": "sends no CTS, nor DATA after a CTS, while receiving or under NAV"}


def unsupported(document: Document, spec: "ExperimentSpec", topology: "Topology",
                flows: tuple["Flow", ...]) -> list[Problem]:
    """Every setting of one planned run that ns-2.35 cannot reproduce."""
    problems: list[Problem] = []

    def refuse(path: DataPath, message: str) -> None:
        problem = document.problem(path, message)
        if problem not in problems:
            problems.append(problem)

    _setup(document, spec, topology, refuse)
    _routing(topology, flows, refuse)
    _radios(document, topology, refuse)
    _traffic(flows, refuse)
    return problems


def _setup(document: Document, spec: "ExperimentSpec", topology: "Topology", refuse: Any) -> None:
    if topology.backend["kind"] != "tap":
        refuse(("topology", "backend"), "ns-2 has no mac80211_hwsim radios (its Mac/802_11 is the model): "
                                        "remove backend for --driver ns2")
    if topology.medium["mac"]["kind"] != "dcf":
        refuse(("mac",) if spec.mac is not None else ("topology", "mac"),
               "ns-2.35's Mac/802_11 is DCF only: use mac: dcf with --driver ns2")
    if topology.queueing.runs_daemon:
        refuse(("topology", "queueing"), "bpd is a daemon of ours and runs in labs only; ns-2 nodes queue in their "
                                         "interface queue (queueing: fifo)")
    if topology.medium["links"]:
        refuse(("topology", "links"), "ns-2's WirelessPhy has no per-link bit error rate or extra loss")
    if spec.sysctl:
        refuse(("sysctl",), "sysctl sets the Linux kernels of a lab's nodes; ns-2 nodes have none")
    # stats_interval and view only add a lab's counters over time and a recording, no metric: ns-2 runs have none.
    for key in ("capture", "sim_reference"):
        if getattr(spec.measure, key):
            refuse(("measure", key), f"measure.{key} adds metrics of labs (a capture of the TCP senders, the "
                                     "sim driver's reference) that the ns-2 driver does not produce")


def _routing(topology: "Topology", flows: tuple["Flow", ...], refuse: Any) -> None:
    choice = topology.routing_choice
    if choice.kind.daemon is not None and choice.name != "aodv":
        refuse(("topology", "routing"), f"routing {choice.name} is a daemon that runs in labs only; ns-2 offers "
                                        "aodv, dsr and dsdv")
    elif choice.name == "aodv":
        for option, value in choice.options.items():
            if option in NS2_AODV_MOOT:
                continue
            if option not in NS2_AODV:
                refuse(("topology", "routing", "aodv", option.removesuffix("_ms")),
                       "ns-2.35's AODV has no such setting")
                continue
            key, fixed, what = NS2_AODV[option]
            if value != fixed:
                refuse(("topology", "routing", "aodv", key), f"Debian's ns-2.35 AODV {what}; its settings are "
                                                             "compile-time constants")
    elif choice.name == "dsr" and not topology.medium["nodes"][0]["radio"]["queue_priority"]:
        refuse(("topology", "routing"), "ns-2's DSR needs its CMUPriQueue, which always sends routing packets "
                                        "first: queue_priority true")
    elif choice.name in ("static", "none"):
        far = [flow for flow in flows if flow.dst is not None and flow.hops != 1]
        if far:
            refuse(("topology", "routing"), f"ns-2 has no {choice.name} routes for wireless nodes: its DumbAgent "
                   f"reaches neighbours only, and flow {far[0].name} is {far[0].hops or 'not'} hops: use aodv, dsr "
                   "or dsdv")


def _radios(document: Document, topology: "Topology", refuse: Any) -> None:
    nodes = topology.medium["nodes"]
    first = nodes[0]["radio"]
    for node in nodes[1:]:
        if node["radio"] != first:
            differ = sorted(key for key in first if node["radio"][key] != first[key])
            refuse(("topology", "nodes", node["name"], "radio"), f"ns-2.35's channel assumes every node has the "
                   f"same radio (one carrier-sense range for all); {node['name']} differs from "
                   f"{nodes[0]['name']} in {', '.join(differ)}")
            break
    if first["phy"] != "dsss":
        refuse(_radio_path(document, "phy"), "ns-2.35's Mac/802_11 times DSSS frames (802.11b) only; OFDM "
                                             "(802.11a/g) radios are not modelled")
    if first["bit_error_rate"]:
        refuse(_radio_path(document, "bit_error_rate"), "ns-2's WirelessPhy has no bit errors")
    if first["capture_restart"]:
        refuse(_radio_path(document, "capture_restart"), "ns-2 captures only a frame that starts first: "
                                                         "capture_restart false")
    if first["interference_floor_dbm"] < first["cs_threshold_dbm"] - 1e-9:
        refuse(_radio_path(document, "interference_floor"), "ns-2's WirelessPhy drops a signal under its "
               "carrier-sense threshold, which then counts for nothing: interference_floor equal to cs_threshold")
    for key, what in NS2_MAC.items():
        if key in first and not first[key]:
            refuse(_radio_path(document, key), f"ns-2.35's MAC always {what}: {key} true")
    propagation = first["propagation"]
    if propagation["model"] == "shadowing" and propagation["per"] != "frame":
        refuse(_radio_path(document, "propagation"), "ns-2's Shadowing draws anew for every frame: per: frame")
    for node in nodes:
        heights = [node["position"][2]]
        mobility = node["mobility"]
        heights += [point["position"][2] for point in mobility.get("points", [])]
        heights += [move["target"][2] for move in mobility.get("moves", [])]
        if any(heights):
            refuse(("topology", "nodes", node["name"], "position"), "ns-2's two-ray model assumes flat ground and "
                   "its channel finds receivers from the antenna height alone: keep z at 0 and set "
                   "radio.antenna_height")


def _radio_path(document: Document, key: str) -> DataPath:
    """Where a radio setting is written: a node's radio, the defaults, the
    topology's radio, or else its profile."""
    for name, node in (document.get(("topology", "nodes")) or {}).items():
        if isinstance(node, dict) and isinstance(node.get("radio"), dict) and key in node["radio"]:
            return ("topology", "nodes", name, "radio", key)
    for prefix in (("topology", "defaults", "radio"), ("topology", "radio")):
        if document.get(prefix + (key,)) is not None:
            return prefix + (key,)
    return ("topology", "profile")


def _traffic(flows: tuple["Flow", ...], refuse: Any) -> None:
    # One flow per traffic entry, in order.
    for index, flow in enumerate(flows):
        path = ("traffic", index)
        if flow.kind in ("command", "tfrc"):
            what = "runs a program in a lab's node" if flow.kind == "command" else \
                "is our TFRC tool, which runs in labs only"
            refuse(path + ("kind",), f"a {flow.kind} flow {what}; ns-2 runs tcp (bulk) and udp (CBR) flows")
        elif flow.kind == "tcp":
            cc, sack = flow.options["cc"], flow.options["sack"]
            given = "no cc (a lab's kernel default)" if cc is None else f"cc {cc!r}"
            if flow.options.get("ns2_agent") == "linux":
                if cc not in LINUX_CCS:
                    refuse(path + ("cc",), f"ns-2's {LINUX_AGENT} has the congestion controls "
                                           f"{', '.join(LINUX_CCS)}, not {given}")
            elif cc not in TCP_AGENTS:
                hint = f" (ns2_agent: linux runs Linux's {cc} in {LINUX_AGENT})" if cc in LINUX_CCS else ""
                refuse(path + ("cc",), f"ns-2 has TCP agents for {', '.join(TCP_AGENTS)}, not {given}{hint}")
            elif sack and cc not in SACK_CCS:
                refuse(path + ("sack",), f"ns-2 has SACK only in {SACK_AGENT}, a Reno sender: use cc: reno or sack")
            elif sack is False and TCP_AGENTS[cc] == SACK_AGENT:
                refuse(path + ("sack",), f"cc: sack is {SACK_AGENT}, which always uses SACK")
