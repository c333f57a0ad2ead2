//! COPAS control messages: RREQ, ROUTE (the RREP, and the route set-up of
//! a reroute), PROBE, RERR and ROUTE_ACK (a ROUTE received, to the hop that
//! sent it). Big-endian, on UDP port 654 like AODV, with their own type
//! numbers (64-68) so that an AODV packet is refused, not misread. Decoding never panics: every length and count is checked.
//!
//! Contention values are hundredths of a backoff per T_BACKOFF, saturating
//! at 655.35 in a hop entry; sums are u32.

use std::net::Ipv4Addr;

use thiserror::Error;

pub const RREQ: u8 = 64;
pub const ROUTE: u8 = 65;
pub const PROBE: u8 = 66;
pub const RERR: u8 = 67;
pub const ROUTE_ACK: u8 = 68;
/// The longest path a message may carry (node addresses, both ends included).
pub const MAX_PATH: usize = 64;
/// A `replaced_contention` meaning "the path is broken: any path will do".
pub const BROKEN: u32 = u32::MAX;

/// Which of a pair's two paths a message is about. A pair (src, dst) is
/// named by the node that started the discovery (src); data from src to
/// dst uses the forward path, dst's traffic back (TCP ACKs) the reverse.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// Both paths at once: a discovery, or a single path for both ways.
    Both = 0,
    Forward = 1,
    Reverse = 2,
}

impl Role {
    fn decode(byte: u8) -> Result<Role, PacketError> {
        match byte {
            0 => Ok(Role::Both),
            1 => Ok(Role::Forward),
            2 => Ok(Role::Reverse),
            other => Err(PacketError::Role(other)),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Role::Both => "both",
            Role::Forward => "forward",
            Role::Reverse => "reverse",
        }
    }
}

/// A node on a recorded path and its smoothed contention (hundredths).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hop {
    pub addr: Ipv4Addr,
    pub contention: u16,
}

/// A route request, flooded. `hops` starts with the originator (src for a
/// discovery; for a reroute the end that floods) and grows by one entry per
/// relay. `replaced_contention`: the relays' contention sum of the path to
/// replace as the originator last measured it ([`BROKEN`]: it is broken; 0
/// for a discovery).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rreq {
    pub role: Role,
    pub id: u32,
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub replaced_contention: u32,
    pub hops: Vec<Hop>,
}

/// A chosen path (listed from the pair's src to its dst) travelling hop by
/// hop to one end; every node on it installs the pair's routes along it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub role: Role,
    /// Travelling toward dst (else toward src).
    pub toward_dst: bool,
    pub id: u32,
    /// The relays' contention sum when the path was chosen.
    pub contention: u32,
    /// Which choice from the RREQ's copies this is: 0 the first, 1 and on
    /// after the chooser's earlier ROUTE died at its first hop (a re-choice).
    pub choice: u8,
    pub path: Vec<Ipv4Addr>,
}

impl Route {
    /// What names this ROUTE in its acknowledgement: one RREQ (`id`, of the
    /// end that asked) gives at most one ROUTE per role, direction and choice.
    pub fn ack(&self) -> RouteAck {
        let (src, dst) = (self.path[0], self.path[self.path.len() - 1]);
        RouteAck { role: self.role, toward_dst: self.toward_dst, id: self.id, choice: self.choice, src, dst }
    }
}

/// "I received this ROUTE": sent back to the neighbour it came from, which
/// retransmits the ROUTE until this arrives (or it gives up).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RouteAck {
    pub role: Role,
    pub toward_dst: bool,
    pub id: u32,
    pub choice: u8,
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
}

/// A contention probe along the path one end sends on (forward: from src
/// toward dst; reverse: from dst toward src), following the kernel routes;
/// every node appends itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Probe {
    pub role: Role,
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub hops: Vec<Hop>,
}

/// A path broke: travelling along `path` back to the end that sends on it
/// (forward: toward src; reverse: toward dst).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rerr {
    pub role: Role,
    pub path: Vec<Ipv4Addr>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    Rreq(Rreq),
    Route(Route),
    Probe(Probe),
    Rerr(Rerr),
    RouteAck(RouteAck),
}

#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum PacketError {
    #[error("empty packet")]
    Empty,
    #[error("unknown message type {0}")]
    Type(u8),
    #[error("unknown role {0}")]
    Role(u8),
    #[error("{kind}: {len} bytes, expected {expected}")]
    Length { kind: &'static str, len: usize, expected: usize },
    #[error("{kind}: {count} path entries (1-{MAX_PATH} allowed)")]
    Count { kind: &'static str, count: usize },
    #[error("{kind}: {addr} appears twice on the path")]
    Loop { kind: &'static str, addr: Ipv4Addr },
    #[error("{kind}: {problem}")]
    Invalid { kind: &'static str, problem: &'static str },
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn u8(&mut self) -> u8 {
        let value = self.bytes[self.at];
        self.at += 1;
        value
    }
    fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8(), self.u8()])
    }
    fn u32(&mut self) -> u32 {
        u32::from_be_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn addr(&mut self) -> Ipv4Addr {
        Ipv4Addr::from(self.u32())
    }
}

/// Checks the length of a message of `header` bytes plus `count` entries of
/// `entry` bytes, and returns a reader past its first four bytes.
fn layout<'a>(
    kind: &'static str,
    bytes: &'a [u8],
    header: usize,
    entry: usize,
    min_count: usize,
) -> Result<(Reader<'a>, usize), PacketError> {
    if bytes.len() < 4 {
        return Err(PacketError::Length { kind, len: bytes.len(), expected: header });
    }
    let count = bytes[2] as usize;
    if count < min_count || count > MAX_PATH {
        return Err(PacketError::Count { kind, count });
    }
    let expected = header + count * entry;
    if bytes.len() != expected {
        return Err(PacketError::Length { kind, len: bytes.len(), expected });
    }
    Ok((Reader { bytes, at: 4 }, count))
}

fn direction(kind: &'static str, byte: u8) -> Result<bool, PacketError> {
    match byte {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(PacketError::Invalid { kind, problem: "direction must be 0 or 1" }),
    }
}

fn no_loops(kind: &'static str, addrs: impl Iterator<Item = Ipv4Addr>) -> Result<(), PacketError> {
    let mut seen = Vec::new();
    for addr in addrs {
        if seen.contains(&addr) {
            return Err(PacketError::Loop { kind, addr });
        }
        seen.push(addr);
    }
    Ok(())
}

const RREQ_HEADER: usize = 20;
const ROUTE_HEADER: usize = 13;
const PROBE_HEADER: usize = 12;
const RERR_HEADER: usize = 4;
const ROUTE_ACK_BYTES: usize = 16;
const HOP_BYTES: usize = 6;

impl Message {
    pub fn kind(&self) -> &'static str {
        match self {
            Message::Rreq(_) => "rreq",
            Message::Route(_) => "route",
            Message::Probe(_) => "probe",
            Message::Rerr(_) => "rerr",
            Message::RouteAck(_) => "route_ack",
        }
    }

    pub fn decode(bytes: &[u8]) -> Result<Message, PacketError> {
        let kind = *bytes.first().ok_or(PacketError::Empty)?;
        match kind {
            RREQ => {
                let (mut r, count) = layout("rreq", bytes, RREQ_HEADER, HOP_BYTES, 1)?;
                let role = Role::decode(bytes[1])?;
                let (id, src, dst, replaced_contention) = (r.u32(), r.addr(), r.addr(), r.u32());
                let hops: Vec<Hop> = (0..count).map(|_| Hop { addr: r.addr(), contention: r.u16() }).collect();
                no_loops("rreq", hops.iter().map(|h| h.addr))?;
                if src == dst {
                    return Err(PacketError::Invalid { kind: "rreq", problem: "src and dst are the same node" });
                }
                let origin = hops[0].addr;
                if origin != src && (role == Role::Both || origin != dst) {
                    return Err(PacketError::Invalid { kind: "rreq", problem: "the first hop is not an end of the pair" });
                }
                Ok(Message::Rreq(Rreq { role, id, src, dst, replaced_contention, hops }))
            }
            ROUTE => {
                let (mut r, count) = layout("route", bytes, ROUTE_HEADER, 4, 2)?;
                let role = Role::decode(bytes[1])?;
                let toward_dst = direction("route", bytes[3])?;
                let (id, contention, choice) = (r.u32(), r.u32(), r.u8());
                let path: Vec<Ipv4Addr> = (0..count).map(|_| r.addr()).collect();
                no_loops("route", path.iter().copied())?;
                Ok(Message::Route(Route { role, toward_dst, id, contention, choice, path }))
            }
            PROBE => {
                let (mut r, count) = layout("probe", bytes, PROBE_HEADER, HOP_BYTES, 1)?;
                let role = Role::decode(bytes[1])?;
                if role == Role::Both {
                    return Err(PacketError::Invalid { kind: "probe", problem: "a probe follows one path" });
                }
                let (src, dst) = (r.addr(), r.addr());
                let hops: Vec<Hop> = (0..count).map(|_| Hop { addr: r.addr(), contention: r.u16() }).collect();
                no_loops("probe", hops.iter().map(|h| h.addr))?;
                Ok(Message::Probe(Probe { role, src, dst, hops }))
            }
            RERR => {
                let (mut r, count) = layout("rerr", bytes, RERR_HEADER, 4, 2)?;
                let role = Role::decode(bytes[1])?;
                if role == Role::Both {
                    return Err(PacketError::Invalid { kind: "rerr", problem: "a RERR is about one direction" });
                }
                let path: Vec<Ipv4Addr> = (0..count).map(|_| r.addr()).collect();
                no_loops("rerr", path.iter().copied())?;
                Ok(Message::Rerr(Rerr { role, path }))
            }
            ROUTE_ACK => {
                if bytes.len() != ROUTE_ACK_BYTES {
                    return Err(PacketError::Length { kind: "route_ack", len: bytes.len(), expected: ROUTE_ACK_BYTES });
                }
                let role = Role::decode(bytes[1])?;
                let choice = bytes[2];
                let toward_dst = direction("route_ack", bytes[3])?;
                let mut r = Reader { bytes, at: 4 };
                let (id, src, dst) = (r.u32(), r.addr(), r.addr());
                if src == dst {
                    return Err(PacketError::Invalid { kind: "route_ack", problem: "src and dst are the same node" });
                }
                Ok(Message::RouteAck(RouteAck { role, toward_dst, id, choice, src, dst }))
            }
            other => Err(PacketError::Type(other)),
        }
    }

    /// The wire form. Paths longer than [`MAX_PATH`] are the caller's bug;
    /// the core never builds one (relays refuse to grow a full RREQ).
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(64);
        let hops = |bytes: &mut Vec<u8>, hops: &[Hop]| {
            for hop in hops {
                bytes.extend_from_slice(&hop.addr.octets());
                bytes.extend_from_slice(&hop.contention.to_be_bytes());
            }
        };
        let addrs = |bytes: &mut Vec<u8>, path: &[Ipv4Addr]| {
            for addr in path {
                bytes.extend_from_slice(&addr.octets());
            }
        };
        match self {
            Message::Rreq(m) => {
                bytes.extend_from_slice(&[RREQ, m.role as u8, m.hops.len() as u8, 0]);
                bytes.extend_from_slice(&m.id.to_be_bytes());
                bytes.extend_from_slice(&m.src.octets());
                bytes.extend_from_slice(&m.dst.octets());
                bytes.extend_from_slice(&m.replaced_contention.to_be_bytes());
                hops(&mut bytes, &m.hops);
            }
            Message::Route(m) => {
                bytes.extend_from_slice(&[ROUTE, m.role as u8, m.path.len() as u8, m.toward_dst as u8]);
                bytes.extend_from_slice(&m.id.to_be_bytes());
                bytes.extend_from_slice(&m.contention.to_be_bytes());
                bytes.push(m.choice);
                addrs(&mut bytes, &m.path);
            }
            Message::Probe(m) => {
                bytes.extend_from_slice(&[PROBE, m.role as u8, m.hops.len() as u8, 0]);
                bytes.extend_from_slice(&m.src.octets());
                bytes.extend_from_slice(&m.dst.octets());
                hops(&mut bytes, &m.hops);
            }
            Message::Rerr(m) => {
                bytes.extend_from_slice(&[RERR, m.role as u8, m.path.len() as u8, 0]);
                addrs(&mut bytes, &m.path);
            }
            Message::RouteAck(m) => {
                bytes.extend_from_slice(&[ROUTE_ACK, m.role as u8, m.choice, m.toward_dst as u8]);
                bytes.extend_from_slice(&m.id.to_be_bytes());
                addrs(&mut bytes, &[m.src, m.dst]);
            }
        }
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn a(last: u8) -> Ipv4Addr {
        Ipv4Addr::new(10, 0, 0, last)
    }

    #[test]
    fn rreq_layout_is_the_documented_one() {
        let rreq = Message::Rreq(Rreq {
            role: Role::Both,
            id: 7,
            src: a(1),
            dst: a(9),
            replaced_contention: 0,
            hops: vec![Hop { addr: a(1), contention: 250 }, Hop { addr: a(4), contention: 1 }],
        });
        let bytes = rreq.encode();
        assert_eq!(bytes.len(), 20 + 2 * 6);
        assert_eq!(&bytes[..8], &[64, 0, 2, 0, 0, 0, 0, 7]);
        assert_eq!(&bytes[20..26], &[10, 0, 0, 1, 0, 250]);
        assert_eq!(Message::decode(&bytes).unwrap(), rreq);
    }

    #[test]
    fn bad_packets_are_errors_that_say_why() {
        assert_eq!(Message::decode(&[]), Err(PacketError::Empty));
        assert_eq!(Message::decode(&[1, 0, 0, 0]), Err(PacketError::Type(1)), "an AODV RREQ is not ours");
        let route = Message::Route(Route { role: Role::Forward, toward_dst: false, id: 1, contention: 3, choice: 0, path: vec![a(1), a(2), a(3)] });
        let mut bytes = route.encode();
        bytes.pop();
        assert!(matches!(Message::decode(&bytes), Err(PacketError::Length { kind: "route", .. })));
        let mut looped = route.encode();
        looped[17..21].copy_from_slice(&[10, 0, 0, 1]);
        assert_eq!(Message::decode(&looped), Err(PacketError::Loop { kind: "route", addr: a(1) }));
        let mut one_node = route.encode();
        one_node[2] = 1;
        one_node.truncate(17);
        assert!(matches!(Message::decode(&one_node), Err(PacketError::Count { .. })));
        let mut role = route.encode();
        role[1] = 9;
        assert_eq!(Message::decode(&role), Err(PacketError::Role(9)));
        let stranger = Message::Rreq(Rreq { role: Role::Both, id: 1, src: a(1), dst: a(2), replaced_contention: 0, hops: vec![Hop { addr: a(3), contention: 0 }] });
        assert!(matches!(Message::decode(&stranger.encode()), Err(PacketError::Invalid { .. })));
    }

    #[test]
    fn route_layout_is_the_documented_one() {
        let route = Message::Route(Route { role: Role::Reverse, toward_dst: true, id: 7, contention: 0x0102, choice: 2, path: vec![a(1), a(5), a(9)] });
        let bytes = route.encode();
        assert_eq!(bytes.len(), 13 + 3 * 4);
        assert_eq!(&bytes[..17], &[65, 2, 3, 1, 0, 0, 0, 7, 0, 0, 1, 2, 2, 10, 0, 0, 1]);
        assert_eq!(Message::decode(&bytes).unwrap(), route);
    }

    #[test]
    fn route_ack_layout_names_the_route_it_acknowledges() {
        let route = Route { role: Role::Reverse, toward_dst: false, id: 0x0102_0304, contention: 3, choice: 1, path: vec![a(1), a(5), a(9)] };
        let ack = Message::RouteAck(route.ack());
        let bytes = ack.encode();
        assert_eq!(bytes, [68, 2, 1, 0, 1, 2, 3, 4, 10, 0, 0, 1, 10, 0, 0, 9]);
        assert_eq!(Message::decode(&bytes).unwrap(), ack);
    }

    #[test]
    fn bad_route_acks_are_errors() {
        let bytes = Message::RouteAck(RouteAck { role: Role::Both, toward_dst: true, id: 1, choice: 0, src: a(1), dst: a(2) }).encode();
        for len in 1..bytes.len() {
            assert!(matches!(Message::decode(&bytes[..len]), Err(PacketError::Length { kind: "route_ack", .. })), "{len} bytes");
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(matches!(Message::decode(&long), Err(PacketError::Length { kind: "route_ack", .. })));
        let mut role = bytes.clone();
        role[1] = 3;
        assert_eq!(Message::decode(&role), Err(PacketError::Role(3)));
        let mut direction = bytes.clone();
        direction[3] = 2;
        assert!(matches!(Message::decode(&direction), Err(PacketError::Invalid { kind: "route_ack", .. })));
        let mut same = bytes.clone();
        same[12..16].copy_from_slice(&[10, 0, 0, 1]);
        assert!(matches!(Message::decode(&same), Err(PacketError::Invalid { kind: "route_ack", .. })));
    }

    fn hop() -> impl Strategy<Value = Hop> {
        (any::<u32>(), any::<u16>()).prop_map(|(addr, contention)| Hop { addr: Ipv4Addr::from(addr), contention })
    }

    fn distinct<T: Clone>(items: Vec<T>, key: impl Fn(&T) -> Ipv4Addr) -> Vec<T> {
        let mut seen = Vec::new();
        items.into_iter().filter(|item| if seen.contains(&key(item)) { false } else { seen.push(key(item)); true }).collect()
    }

    proptest! {
        #[test]
        fn messages_round_trip(
            hops in proptest::collection::vec(hop(), 1..MAX_PATH),
            path in proptest::collection::vec(any::<u32>().prop_map(Ipv4Addr::from), 2..MAX_PATH),
            id in any::<u32>(), contention in any::<u32>(), toward_dst in any::<bool>(), dst in any::<u32>(), choice in any::<u8>(),
        ) {
            let hops = distinct(hops, |h| h.addr);
            let path = distinct(path, |a| *a);
            let src = hops[0].addr;
            let dst = Ipv4Addr::from(dst);
            let mut messages = vec![
                Message::Probe(Probe { role: Role::Reverse, src, dst, hops: hops.clone() }),
            ];
            if dst != src {
                messages.push(Message::Rreq(Rreq { role: Role::Forward, id, src, dst, replaced_contention: contention, hops: hops.clone() }));
            }
            if path.len() >= 2 {
                messages.push(Message::Route(Route { role: Role::Both, toward_dst, id, contention, choice, path: path.clone() }));
                messages.push(Message::Rerr(Rerr { role: Role::Forward, path: path.clone() }));
            }
            if dst != src {
                messages.push(Message::RouteAck(RouteAck { role: Role::Forward, toward_dst, id, choice, src, dst }));
            }
            for message in messages {
                prop_assert_eq!(Message::decode(&message.encode()), Ok(message));
            }
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600), kind in 64u8..69) {
            let mut bytes = bytes;
            if let Some(first) = bytes.first_mut() {
                *first = kind;
            }
            let _ = Message::decode(&bytes);
        }
    }
}
