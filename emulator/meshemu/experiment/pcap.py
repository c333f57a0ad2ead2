"""Data and ACK events of a TCP connection from a tcpdump capture on the
sender's wlan0 (`tcpdump -s 96`: headers only), for sequence/ACK traces in
the style of Fig. 2 of the TCP-variants paper.

dpkt reads the pcap: a small, pure-Python, long-maintained reader that
decodes Ethernet/IPv4/TCP headers without the weight of scapy or a tshark
process per file.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import dpkt


def tcp_events(path: Path, sender_ip: str, port: int) -> list[dict[str, Any]]:
    """One event per TCP segment of the connection to `port`: `data` (sent
    by `sender_ip`, with `retransmission` when it repeats sequence space
    already sent) or `ack` (from the receiver). Sequence numbers relative to
    the first one seen; times in ns since the epoch."""
    events: list[dict[str, Any]] = []
    base: dict[str, int] = {}
    highest_sent: dict[int, int] = {}  # per connection (iperf3's control connection shares the port)
    try:
        handle = open(path, "rb")
    except FileNotFoundError:
        return []
    with handle:
        try:
            reader = dpkt.pcap.Reader(handle)
        except (ValueError, dpkt.dpkt.NeedData):
            return []  # an empty or torn capture
        packets = iter(reader)
        while True:
            try:
                timestamp, frame = next(packets)
            except StopIteration:
                break
            except (dpkt.dpkt.NeedData, ValueError):
                break  # the last record was cut off when tcpdump stopped
            try:
                ethernet = dpkt.ethernet.Ethernet(frame)
            except (dpkt.dpkt.NeedData, dpkt.dpkt.UnpackError):
                continue
            ip = ethernet.data
            if not isinstance(ip, dpkt.ip.IP) or not isinstance(ip.data, dpkt.tcp.TCP):
                continue
            tcp = ip.data
            if port not in (tcp.sport, tcp.dport):
                continue
            outgoing = socket.inet_ntoa(ip.src) == sender_ip
            # -s 96 cuts the payload: its length comes from the IP header.
            length = ip.len - ip.hl * 4 - tcp.off * 4
            event: dict[str, Any] = {"time_ns": int(round(timestamp * 1e9)), "sport": tcp.sport, "dport": tcp.dport}
            if outgoing:
                first = base.setdefault(f"{tcp.sport}", tcp.seq)
                seq = (tcp.seq - first) % 2**32
                event.update(kind="data" if length > 0 else "ack-only", seq=seq, len=length,
                             retransmission=length > 0 and seq + length <= highest_sent.get(tcp.sport, 0))
                if length > 0:
                    highest_sent[tcp.sport] = max(highest_sent.get(tcp.sport, 0), seq + length)
            else:
                first = base.get(f"{tcp.dport}")
                if first is None or not tcp.flags & dpkt.tcp.TH_ACK:
                    continue
                event.update(kind="ack", ack=(tcp.ack - first) % 2**32, window=tcp.win)
            events.append(event)
    return events
