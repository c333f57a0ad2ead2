//! Turning an Ethernet frame read from a node's TAP into the model's
//! [`Frame`]: who it is for and what it carries (routing control, ARP, data).

use std::collections::HashMap;
use std::sync::Arc;

use meshemu_model::{Dest, Frame, NodeId, PacketKind};

/// What the medium carries for a frame: the whole Ethernet frame as read.
pub type Payload = Arc<[u8]>;

pub const ETHERNET_HEADER_LEN: usize = 14;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_ARP: u16 = 0x0806;
const IP_PROTOCOL_UDP: u8 = 17;

/// Classifies frames of one lab.
pub struct Classifier {
    node_by_mac: HashMap<[u8; 6], NodeId>,
    priority_udp_ports: Vec<u16>,
}

impl Classifier {
    pub fn new(macs: &[[u8; 6]], priority_udp_ports: &[u16]) -> Self {
        Classifier {
            node_by_mac: macs.iter().enumerate().map(|(i, mac)| (*mac, i)).collect(),
            priority_udp_ports: priority_udp_ports.to_vec(),
        }
    }

    /// The model's frame for `ethernet`, or `None` if it is too short to be
    /// an Ethernet frame. `len` is the Ethernet payload (network-layer) length.
    pub fn classify(&self, ethernet: &[u8]) -> Option<Frame<Payload>> {
        if ethernet.len() < ETHERNET_HEADER_LEN {
            return None;
        }
        let destination: [u8; 6] = ethernet[..6].try_into().expect("6 bytes");
        let dst = if destination[0] & 1 == 1 {
            Dest::Broadcast // broadcast and multicast alike
        } else {
            self.node_by_mac.get(&destination).map_or(Dest::Unknown, |&n| Dest::Node(n))
        };
        Some(Frame {
            dst,
            len: (ethernet.len() - ETHERNET_HEADER_LEN) as u32,
            carries: self.carries(ethernet),
            payload: Arc::from(ethernet),
        })
    }

    fn carries(&self, ethernet: &[u8]) -> PacketKind {
        match u16::from_be_bytes([ethernet[12], ethernet[13]]) {
            ETHERTYPE_ARP => PacketKind::Arp,
            ETHERTYPE_IPV4 if self.is_routing(&ethernet[ETHERNET_HEADER_LEN..]) => PacketKind::Routing,
            _ => PacketKind::Data,
        }
    }

    /// An IPv4 packet that is a UDP datagram (first or only fragment) to one
    /// of the priority ports.
    fn is_routing(&self, ip: &[u8]) -> bool {
        if self.priority_udp_ports.is_empty() || ip.len() < 20 || ip[0] >> 4 != 4 {
            return false;
        }
        let header_len = usize::from(ip[0] & 0x0f) * 4;
        let fragment_offset = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff;
        if ip[9] != IP_PROTOCOL_UDP || fragment_offset != 0 || header_len < 20 || ip.len() < header_len + 4 {
            return false;
        }
        let port = u16::from_be_bytes([ip[header_len + 2], ip[header_len + 3]]);
        self.priority_udp_ports.contains(&port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const B: [u8; 6] = [2, 0, 0, 0, 0, 2];

    fn ethernet(dst: [u8; 6], ethertype: u16, body: &[u8]) -> Vec<u8> {
        let mut f = dst.to_vec();
        f.extend_from_slice(&A);
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(body);
        f
    }

    /// IPv4 header (IHL 5 unless options given) + UDP header to `port`.
    fn udp(port: u16, options: usize, fragment_offset: u16) -> Vec<u8> {
        let ihl = 5 + options / 4;
        let mut ip = vec![0u8; ihl * 4];
        ip[0] = 0x40 | ihl as u8;
        ip[6..8].copy_from_slice(&fragment_offset.to_be_bytes());
        ip[9] = IP_PROTOCOL_UDP;
        ip.extend_from_slice(&1234u16.to_be_bytes());
        ip.extend_from_slice(&port.to_be_bytes());
        ip.extend_from_slice(&[0, 12, 0, 0, 1, 2, 3, 4]);
        ip
    }

    fn classifier() -> Classifier {
        Classifier::new(&[A, B], &[654, 6696])
    }

    #[test]
    fn destination_by_mac() {
        let c = classifier();
        assert_eq!(c.classify(&ethernet(B, 0x0800, &[0; 30])).unwrap().dst, Dest::Node(1));
        assert_eq!(c.classify(&ethernet([0xff; 6], 0x0806, &[0; 28])).unwrap().dst, Dest::Broadcast);
        let multicast = [0x01, 0x00, 0x5e, 0, 0, 1];
        assert_eq!(c.classify(&ethernet(multicast, 0x0800, &[0; 30])).unwrap().dst, Dest::Broadcast);
        let stranger = [2, 9, 9, 9, 9, 9];
        assert_eq!(c.classify(&ethernet(stranger, 0x0800, &[0; 30])).unwrap().dst, Dest::Unknown);
    }

    #[test]
    fn length_is_the_ethernet_payload_and_payload_the_whole_frame() {
        let frame = ethernet(B, 0x0800, &[7; 100]);
        let f = classifier().classify(&frame).unwrap();
        assert_eq!(f.len, 100);
        assert_eq!(&f.payload[..], &frame[..]);
        assert!(classifier().classify(&frame[..13]).is_none());
        assert_eq!(classifier().classify(&frame[..14]).unwrap().len, 0);
    }

    #[test]
    fn routing_control_ports_get_priority() {
        let c = classifier();
        let carries = |frame: Vec<u8>| c.classify(&frame).unwrap().carries;
        assert_eq!(carries(ethernet(B, 0x0800, &udp(654, 0, 0))), PacketKind::Routing);
        assert_eq!(carries(ethernet([0xff; 6], 0x0800, &udp(6696, 8, 0))), PacketKind::Routing, "IP options");
        assert_eq!(carries(ethernet(B, 0x0800, &udp(5001, 0, 0))), PacketKind::Data);
        assert_eq!(carries(ethernet(B, 0x0800, &udp(654, 0, 100))), PacketKind::Data, "later fragment");
        let mut tcp = udp(654, 0, 0);
        tcp[9] = 6;
        assert_eq!(carries(ethernet(B, 0x0800, &tcp)), PacketKind::Data, "TCP");
        assert_eq!(carries(ethernet(B, 0x86dd, &udp(654, 0, 0))), PacketKind::Data, "not IPv4");
        assert_eq!(carries(ethernet(B, 0x0800, &udp(654, 0, 0)[..22])), PacketKind::Data, "truncated");
        let none = Classifier::new(&[A, B], &[]).classify(&ethernet(B, 0x0800, &udp(654, 0, 0))).unwrap();
        assert_eq!(none.carries, PacketKind::Data, "no priority ports");
    }

    #[test]
    fn arp_is_told_apart() {
        let c = classifier();
        assert_eq!(c.classify(&ethernet(B, 0x0806, &[0; 28])).unwrap().carries, PacketKind::Arp);
        assert_eq!(c.classify(&ethernet([0xff; 6], 0x0806, &[0; 28])).unwrap().carries, PacketKind::Arp);
    }
}
