#!/usr/bin/env python3
"""Run a meshemu sim file in ns-2.35 and in `meshemu sim`, and set their MAC
counters side by side.

    python experiments/validation/ns2/ns2.py FILE.yaml [--routing AODV|DSDV|DumbAgent]
        [--seeds 1,2,3] [--only PARAM=VALUE] [--tcl-dir DIR] [--per-node] [--no-sim]

The scenario (positions, radio values of every node, flows, duration) is the
one `meshemu sim --dry-run FILE` resolves, so both simulators run the same
thing. One Tcl file per sweep point is written to --tcl-dir (default: next to
FILE, `tcl/<stem>[-point].tcl`); it takes the seed and the trace path on its
command line (`ns FILE.tcl SEED TRACE`), so it can be rerun by hand.

ns-2 has no static routes for multi-hop wireless: multi-hop flows need AODV or
DSDV (`--routing`); DumbAgent sends every packet straight to its IP
destination (one-hop flows only). The sim side always routes statically
(minimum hops; on a grid the same straight lines AODV finds).

Counters taken from ns-2's trace (old wireless format), whole run:
  rts       RTS frames sent (s MAC RTS)           sim: rts_attempts
  cts       CTS frames sent (s MAC CTS)           sim: cts_sent
  data      unicast data frames sent, retries in  sim: data_attempts
  ack       ACK frames sent (s MAC ACK)           sim: acks_sent
  ret       data packets dropped at the retry limit (D MAC RET, not the RTS
            line ns-2 logs beside it)             sim: retry_drops
  col       frames for this node lost to a collision (D MAC COL; ns-2 logs
            only those it could have decoded)     sim: rx_collisions (all)
  bsy       D MAC BSY: RTS/CTS/DATA discarded because the MAC was busy
  ifq       interface-queue drops (D IFQ)         sim: queue_drops
  cbk       packets AODV dropped after a link failure (D RTR CBK: the one
            that failed and the queued ones to the same next hop)
                                                  sim: link_drops (the queued
            ones only; radio retry_drop_flush)
  nrte      packets dropped for want of a route (D RTR NRTE)
  rreq/rrep/rerr  AODV packets sent by routing agents
Flows: goodput over [warmup, duration] at the destination agent.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def dry_run(file: str) -> list[dict]:
    out = subprocess.run(["meshemu", "sim", "--dry-run", file], check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def sim_json(file: str) -> list[dict]:
    out = subprocess.run(["meshemu", "sim", "--json", file], check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def sim_patched(runs: list[dict], radio: dict) -> list[dict]:
    """The sim side with radio fields replaced in every node (a what-if:
    `meshemu-medium sim` on the dry run's scenarios)."""
    from concurrent.futures import ThreadPoolExecutor

    def one(run: dict) -> dict:
        scenario = json.loads(json.dumps(run["scenario"]))
        for node in scenario["medium"]["nodes"]:
            node["radio"].update(radio)
        out = subprocess.run(["meshemu-medium", "sim", "-"], input=json.dumps(scenario), check=True, capture_output=True, text=True).stdout
        return {**json.loads(out), "params": run["params"], "seed": run["seed"]}

    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(one, runs))


def point_name(params: dict) -> str:
    if not params:
        return ""
    parts = []
    for key, value in params.items():
        leaf = key.split(".")[-1]
        parts.append(f"{leaf}={value}")
    return "-" + "-".join(parts).replace("/", "_").replace(" ", "")


def _w(dbm: float) -> float:
    return 10 ** (dbm / 10) / 1000


# --- Tcl ---------------------------------------------------------------------------------

def tcl_of(scenario: dict, source: str, params: dict, routing: str) -> str:
    medium = scenario["medium"]
    nodes = medium["nodes"]
    radios = {json.dumps(n["radio"], sort_keys=True) for n in nodes}
    if len(radios) != 1:
        raise SystemExit("every node must have the same radio (ns-2 class defaults)")
    r = nodes[0]["radio"]
    if r["propagation"]["model"] != "two_ray_ground":
        raise SystemExit("only two_ray_ground is translated")
    if r["preamble"] != "long" or r["phy"] != "dsss":
        raise SystemExit("only DSSS with the long preamble is translated")
    xs = [n["position"][0] for n in nodes]
    ys = [n["position"][1] for n in nodes]
    ox, oy = 10.0 - min(xs), 10.0 - min(ys)
    width = max(xs) + ox + 10.0
    height = max(ys) + oy + 10.0
    duration = scenario["duration_ns"] / 1e9
    rts = r["rts_threshold_bytes"]
    # ns-2 uses RTS/CTS when the frame's size (MPDU + 24 bytes of PLCP it
    # counts in) is >= RTSThreshold_; ours when the MPDU is > the threshold.
    ns_rts = 0 if rts == 0 else rts + 1 + 24
    lines = [
        f"# Generated by experiments/validation/ns2/ns2.py from {source}{' ' + json.dumps(params) if params else ''}.",
        "# Run: ns THIS.tcl SEED TRACEFILE",
        "if {$argc != 2} { puts stderr \"usage: ns [info script] SEED TRACEFILE\"; exit 2 }",
        "set seed [lindex $argv 0]",
        "set tracefile [lindex $argv 1]",
        "",
        "# Class defaults before new Simulator (the ns2-wavelan values of the sim file).",
        f"Mac/802_11 set dataRate_ {r['data_rate_bps']}",
        f"Mac/802_11 set basicRate_ {r['basic_rate_bps']}",
        f"Mac/802_11 set RTSThreshold_ {ns_rts}",
        f"Mac/802_11 set ShortRetryLimit_ {r['short_retry_limit']}",
        f"Mac/802_11 set LongRetryLimit_ {r['long_retry_limit']}",
        f"Mac/802_11 set CWMin_ {r['cw_min']}",
        f"Mac/802_11 set CWMax_ {r['cw_max']}",
        f"Mac/802_11 set SlotTime_ {r['slot_ns'] / 1e9:.9f}",
        f"Mac/802_11 set SIFS_ {r['sifs_ns'] / 1e9:.9f}",
        f"Phy/WirelessPhy set Pt_ {_w(r['tx_power_dbm']):.8g}",
        f"Phy/WirelessPhy set RXThresh_ {_w(r['rx_threshold_dbm']):.6g}",
        f"Phy/WirelessPhy set CSThresh_ {_w(r['cs_threshold_dbm']):.6g}",
        f"Phy/WirelessPhy set CPThresh_ {10 ** (r['capture_threshold_db'] / 10):.6g}",
        f"Phy/WirelessPhy set freq_ {r['frequency_hz']:.6g}",
        f"Phy/WirelessPhy set L_ {10 ** (r['system_loss_db'] / 10):.6g}",
        f"Antenna/OmniAntenna set Z_ {r['antenna_height_m']}",
        f"Antenna/OmniAntenna set Gt_ {10 ** (r['antenna_gain_dbi'] / 10):.6g}",
        f"Antenna/OmniAntenna set Gr_ {10 ** (r['antenna_gain_dbi'] / 10):.6g}",
        f"Queue/DropTail/PriQueue set Prefer_Routing_Protocols {1 if r['queue_priority'] else 0}",
        "Agent/UDP set packetSize_ 4000",
        "",
        "$defaultRNG seed $seed",
        "set ns_ [new Simulator]",
        "set tracefd [open $tracefile w]",
        "$ns_ trace-all $tracefd",
        "set topo [new Topography]",
        f"$topo load_flatgrid {math.ceil(width)} {math.ceil(height)}",
        f"create-god {len(nodes)}",
        f"$ns_ node-config -adhocRouting {routing} -llType LL -macType Mac/802_11 \\",
        f"    -ifqType Queue/DropTail/PriQueue -ifqLen {r['queue_len']} -antType Antenna/OmniAntenna \\",
        "    -propType Propagation/TwoRayGround -phyType Phy/WirelessPhy \\",
        "    -channel [new Channel/WirelessChannel] -topoInstance $topo \\",
        "    -agentTrace ON -routerTrace ON -macTrace ON -movementTrace OFF",
        f"for {{set i 0}} {{$i < {len(nodes)}}} {{incr i}} {{",
        "    set node_($i) [$ns_ node]",
        "    $node_($i) random-motion 0",
        "}",
    ]
    for i, n in enumerate(nodes):
        x, y, z = n["position"]
        lines.append(f"$node_({i}) set X_ {x + ox:.3f}; $node_({i}) set Y_ {y + oy:.3f}; $node_({i}) set Z_ {z:.3f}")
    lines.append("")
    for k, f in enumerate(scenario["flows"]):
        if f["dst"] == "broadcast":
            raise SystemExit(f"flow {f['name']}: broadcast flows are not translated")
        traffic = f["traffic"]
        payload = f["packet_bytes"] - 20  # the routing agent adds a 20-byte IP header
        if traffic["kind"] == "saturated":
            rate = 2 * r["data_rate_bps"]
        elif traffic["kind"] == "cbr":
            rate = traffic["rate_bps"] * payload / f["packet_bytes"]
        else:
            raise SystemExit(f"flow {f['name']}: {traffic['kind']} traffic is not translated")
        start = f["start_ns"] / 1e9
        stop = (f["stop_ns"] / 1e9) if f.get("stop_ns") is not None else duration
        lines += [
            f"set udp_({k}) [new Agent/UDP]",
            f"$ns_ attach-agent $node_({f['src']}) $udp_({k})",
            f"set sink_({k}) [new Agent/LossMonitor]",
            f"$ns_ attach-agent $node_({f['dst']}) $sink_({k})",
            f"$ns_ connect $udp_({k}) $sink_({k})",
            f"set cbr_({k}) [new Application/Traffic/CBR]",
            f"$cbr_({k}) set packetSize_ {payload}",
            f"$cbr_({k}) set rate_ {rate:.0f}",
            f"$cbr_({k}) attach-agent $udp_({k})",
            f"$ns_ at {start:.6f} \"$cbr_({k}) start\"",
            f"$ns_ at {min(stop, duration):.6f} \"$cbr_({k}) stop\"",
        ]
    lines += [
        "",
        "proc finish {} {",
        "    global ns_ tracefd",
        "    $ns_ flush-trace",
        "    close $tracefd",
        "    exit 0",
        "}",
        f"$ns_ at {duration:.6f} \"finish\"",
        "$ns_ run",
        "",
    ]
    return "\n".join(lines)


# --- trace -------------------------------------------------------------------------------

COUNTERS = ["rts", "cts", "data", "ack", "bcast", "ret", "ret_rts", "col", "bsy", "ifq", "cbk", "nrte", "rreq", "rrep", "rerr"]


def parse_trace(path: str, scenario: dict) -> dict:
    nodes = collections.defaultdict(collections.Counter)
    reasons = collections.Counter()
    warmup = scenario["warmup_ns"] / 1e9
    duration = scenario["duration_ns"] / 1e9
    flow_of = {}  # (src, dst) -> flow index
    for k, f in enumerate(scenario["flows"]):
        flow_of[(f["src"], f["dst"])] = k
    delivered = collections.Counter()
    delivered_bytes = collections.Counter()
    with open(path) as fh:
        for line in fh:
            if not line or line[0] not in "sDr":
                continue
            parts = line.split()
            if len(parts) < 8 or not parts[2].startswith("_"):
                continue
            ev, t, node, layer, reason, ptype = parts[0], float(parts[1]), int(parts[2].strip("_")), parts[3], parts[4], parts[6]
            c = nodes[node]
            if ev == "s" and layer == "MAC":
                if ptype == "RTS":
                    c["rts"] += 1
                elif ptype == "CTS":
                    c["cts"] += 1
                elif ptype == "ACK":
                    c["ack"] += 1
                else:
                    # [duration dst src type] in hex: unicast data has a node as MAC destination.
                    macdst = parts[9] if len(parts) > 9 else ""
                    if macdst != "ffffffff":
                        c["data"] += 1
                    else:
                        c["bcast"] += 1
            elif ev == "s" and layer == "RTR" and ptype == "AODV":
                if "REQUEST" in line:
                    c["rreq"] += 1
                elif "REPLY" in line:
                    c["rrep"] += 1
                elif "ERROR" in line:
                    c["rerr"] += 1
            elif ev == "D":
                reasons[(layer, reason)] += 1
                if layer == "MAC" and reason == "RET":
                    c["ret_rts" if ptype == "RTS" else "ret"] += 1
                elif layer == "MAC" and reason == "COL":
                    c["col"] += 1
                elif layer == "MAC" and reason == "BSY":
                    c["bsy"] += 1
                elif layer == "IFQ":
                    c["ifq"] += 1
                elif layer == "RTR" and reason == "CBK":
                    c["cbk"] += 1
                elif layer == "RTR" and reason == "NRTE":
                    c["nrte"] += 1
            elif ev == "r" and layer == "AGT" and warmup <= t <= duration:
                # ------- [src:port dst:port ttl nexthop]
                try:
                    i = parts.index("-------")
                    src = int(parts[i + 1].lstrip("[").split(":")[0])
                    dst = int(parts[i + 2].split(":")[0])
                except (ValueError, IndexError):
                    continue
                k = flow_of.get((src, dst))
                if k is not None:
                    delivered[k] += 1
                    delivered_bytes[k] += int(parts[7])
    window = duration - warmup
    flows = [{"delivered": delivered[k], "throughput_bps": delivered_bytes[k] * 8 / window} for k in range(len(scenario["flows"]))]
    return {"nodes": {n: dict(c) for n, c in nodes.items()}, "flows": flows, "reasons": {f"{a} {b}": v for (a, b), v in sorted(reasons.items())}}


def run_ns2(tcl: Path, seed: int, scenario: dict, keep: str | None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        trace = keep or os.path.join(tmp, "out.tr")
        proc = subprocess.run(["ns", str(tcl), str(seed), trace], capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"ns {tcl} {seed}: exit {proc.returncode}\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
        return parse_trace(trace, scenario)


SIM_OF = {"rts": "rts_attempts", "cts": "cts_sent", "data": "data_attempts", "ack": "acks_sent", "ret": "retry_drops",
          "col": "rx_collisions", "ifq": "queue_drops", "cbk": "link_drops"}


def totals(nodes: dict, keys) -> dict:
    return {k: sum(c.get(k, 0) for c in nodes.values()) for k in keys}


def mmm(values: list[float]) -> str:
    if not values:
        return "-"
    v = sorted(values)
    fmt = (lambda x: f"{x:.0f}") if all(abs(x) >= 100 or x == int(x) for x in v) else (lambda x: f"{x:.3g}")
    return f"{fmt(v[0])} / {fmt(statistics.median(v))} / {fmt(v[-1])}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--routing", default="AODV")
    ap.add_argument("--seeds", help="comma-separated, overrides the file's seeds (ns-2 side and sim side)")
    ap.add_argument("--only", action="append", default=[], help="PARAM=VALUE: only sweep points whose PARAM (leaf name) prints as VALUE")
    ap.add_argument("--tcl-dir")
    ap.add_argument("--per-node", action="store_true")
    ap.add_argument("--no-sim", action="store_true")
    ap.add_argument("--json", action="store_true", help="print the raw per-run results as JSON lines")
    ap.add_argument("--keep-trace", help="keep the trace of the first run at this path")
    ap.add_argument("--radio", action="append", default=[], help="KEY=JSON: sim side only, replace this radio field of every node")
    ap.add_argument("--no-ns2", action="store_true", help="sim side only")
    args = ap.parse_args()

    runs = dry_run(args.file)
    seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else None
    tcl_dir = Path(args.tcl_dir) if args.tcl_dir else Path(args.file).resolve().parent / "tcl"
    tcl_dir.mkdir(parents=True, exist_ok=True)
    stem = Path(args.file).stem
    radio = {k: json.loads(v) for k, v in (item.split("=", 1) for item in args.radio)}
    if args.no_sim:
        sim_list = []
    elif radio or seeds:
        wanted = [r for r in runs if not seeds or r["seed"] in seeds]
        if seeds:
            # Seeds the file does not list: derive the runs from the first seed's scenario.
            have = {(json.dumps(r["params"], sort_keys=True), r["seed"]) for r in wanted}
            for r in runs:
                for seed in seeds:
                    key = (json.dumps(r["params"], sort_keys=True), seed)
                    if key not in have:
                        have.add(key)
                        sc = json.loads(json.dumps(r["scenario"]))
                        sc["medium"]["seed"] = seed
                        wanted.append({**r, "seed": seed, "scenario": sc})
        sim_list = sim_patched(wanted, radio)
    else:
        sim_list = sim_json(args.file)
    sim_results = {(json.dumps(r["params"], sort_keys=True), r["seed"]): r for r in sim_list}

    points: dict[str, dict] = {}
    for run in runs:
        name = point_name(run["params"])
        if any(f"-{o}" not in name + "-" and not (name + "-").count(f"{o}-") for o in args.only):
            continue
        points.setdefault(name, {"params": run["params"], "runs": []})["runs"].append(run)

    for name, point in points.items():
        first = point["runs"][0]["scenario"]
        tcl = tcl_dir / f"{stem}{name}-{args.routing.lower()}.tcl"
        tcl.write_text(tcl_of(first, os.path.relpath(args.file), point["params"], args.routing))
        ns_rows, sim_rows = [], []
        run_seeds = seeds or [r["seed"] for r in point["runs"]]
        for i, seed in enumerate([] if args.no_ns2 else run_seeds):
            res = run_ns2(tcl, seed, first, args.keep_trace if i == 0 else None)
            ns_rows.append(res)
            if args.json:
                print(json.dumps({"simulator": "ns2", "point": point["params"], "seed": seed, **res}))
        if not args.no_sim:
            for seed in run_seeds:
                r = sim_results.get((json.dumps(point["params"], sort_keys=True), seed))
                if r is None:
                    continue
                nodes = r["nodes"] if isinstance(r["nodes"], dict) else {i: n for i, n in enumerate(r["nodes"])}
                sim_rows.append(r)
        print(f"== {args.file} {json.dumps(point['params']) if point['params'] else ''}  ns-2 ({args.routing}): ns {os.path.relpath(tcl)} SEED TRACE; seeds {run_seeds}"
              + (f"; sim radio {json.dumps(radio)}" if radio else ""))
        print(f"{'counter':<8} {'ns-2 min / median / max':>28} {'sim min / median / max':>28}")
        ns_tot = [totals(r["nodes"], COUNTERS) for r in ns_rows]
        sim_tot = []
        for r in sim_rows:
            nodes = r["nodes"] if isinstance(r["nodes"], dict) else {i: n for i, n in enumerate(r["nodes"])}
            sim_tot.append({k: sum(n.get(v, 0) for n in nodes.values()) for k, v in SIM_OF.items()})
        for k in COUNTERS:
            ns_v = [t[k] for t in ns_tot]
            sim_v = [t[k] for t in sim_tot] if k in SIM_OF else []
            print(f"{k:<8} {mmm(ns_v):>28} {mmm(sim_v):>28}")
        for fk, f in enumerate(first["flows"]):
            ns_v = [r["flows"][fk]["throughput_bps"] / 1e3 for r in ns_rows]
            sim_v = [r["flows"][fk]["throughput_bps"] / 1e3 for r in sim_rows]
            print(f"{'kbit/s':<8} {mmm(ns_v):>28} {mmm(sim_v):>28}   flow {f['src']}->{f['dst']}")
        if args.per_node:
            keys = ["rts", "cts", "data", "ret", "col", "ifq", "cbk"]
            allnodes = sorted(set().union(*[r["nodes"].keys() for r in ns_rows]))
            print("per node, first seed: ns-2 | sim   " + " ".join(f"{k:>13}" for k in keys))
            simn = None
            if sim_rows:
                nn = sim_rows[0]["nodes"]
                simn = nn if isinstance(nn, dict) else {i: n for i, n in enumerate(nn)}
                names = [n["name"] for n in first["medium"]["nodes"]]
            for n in allnodes:
                c = ns_rows[0]["nodes"][n]
                row = []
                for k in keys:
                    s = ""
                    if simn is not None and k in SIM_OF:
                        sn = simn.get(names[n], simn.get(n, simn.get(str(n))))
                        s = str(sn[SIM_OF[k]]) if sn else ""
                    row.append(f"{c.get(k, 0):>6}|{s:<6}")
                if any(c.get(k, 0) for k in keys):
                    print(f"  n{n:<4}" + " ".join(row))
        if ns_rows:
            print("ns-2 drop reasons, first seed: " + ", ".join(f"{k}: {v}" for k, v in ns_rows[0]["reasons"].items()))
        print()


if __name__ == "__main__":
    sys.exit(main())
