//! The hwsim backend (`meshemu-medium hwsim`, emulator/README.md section 7):
//! every node gets a mac80211_hwsim radio, so the kernel's own 802.11 stack
//! (mac80211: IBSS or 802.11s joins, beacons, management frames) runs in the
//! node, and the medium registers with the `MAC80211_HWSIM` generic-netlink
//! family as wmediumd does: every frame a radio transmits comes to us with its
//! rate table and cookie, the model decides who receives it, when, at which
//! signal and after how many attempts, and we hand it to the receiving radios
//! (HWSIM_CMD_FRAME) and report the transmit status to the sender
//! (HWSIM_CMD_TX_INFO_FRAME). The model emulates RTS/CTS and ACK itself.
//!
//! The rest is shared with the TAP backend: the same model, LAB.json,
//! statistics pages, control socket, air capture (showing mac80211's frames
//! as they are) and lateness (`realtime/`).
//!
//! Radios are created from the medium's own socket with
//! HWSIM_ATTR_DESTROY_RADIO_ON_CLOSE, so they go away with the medium however
//! it ends, even by SIGKILL.

pub mod bringup;
pub mod frame;
pub mod genl;

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::Arc;

use anyhow::Context;
use meshemu_model::{Dest, Frame, Medium, NodeId, PacketKind, RadioConfig, TxOutcome};
use nix::sys::epoll::{Epoll, EpollEvent, EpollFlags};

use self::genl::{Attr, HwsimMessage, HwsimSocket, Incoming, TxRate, CMD_FRAME, CMD_TX_INFO_FRAME, MAX_RATES};
use super::nodes::NodeSpec;
use super::Backend;
use crate::config::LabConfig;
use crate::pcap::AirBody;
use crate::realtime::{Delivery, Inbound, Port};

/// How the radios join each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// IEEE 802.11 IBSS (ad hoc), fixed BSSID and frequency.
    Ibss,
    /// IEEE 802.11s mesh (no peering security).
    Mesh,
}

#[derive(Debug, Clone)]
pub struct Options {
    pub mode: Mode,
    /// The IBSS SSID or the mesh ID.
    pub ssid: String,
    /// The channel the radios use (2.4 or 5 GHz band); the model's own
    /// `frequency_hz` is what propagation uses.
    pub frequency_mhz: u32,
}

/// What the model carries for a frame: the frame as mac80211 handed it over
/// and what the transmit status needs.
#[derive(Debug)]
pub struct HwsimFrame {
    pub mpdu: Vec<u8>,
    pub transmitter: [u8; 6],
    pub cookie: u64,
    pub flags: u32,
    pub rates: [TxRate; MAX_RATES],
    pub frequency_mhz: u32,
    pub network_len: u32,
}

pub type Payload = Arc<HwsimFrame>;

/// The hwsim backend, with the radios' options.
pub struct Hwsim(pub Options);

impl Backend for Hwsim {
    type Port = HwsimPort;

    /// Registration as the medium, radios, namespaces, addresses and routes.
    fn attach(&self, config: &LabConfig, specs: &[NodeSpec]) -> anyhow::Result<(HwsimPort, Vec<u64>)> {
        let mut data = HwsimSocket::open().map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                anyhow::anyhow!(
                    "this kernel has no mac80211_hwsim (the generic netlink family MAC80211_HWSIM is missing; \
                     modprobe mac80211_hwsim radios=0 loads it where the kernel has it): use the VM mode, \
                     meshemu vm -- <meshemu command>"
                )
            } else {
                anyhow::anyhow!("opening the MAC80211_HWSIM generic netlink socket: {e}")
            }
        })?;
        data.request(HwsimMessage { cmd: genl::CMD_REGISTER, attrs: vec![] }).map_err(|e| {
            let why = match e.raw_os_error() {
                Some(libc::EBUSY) => " (another medium, such as wmediumd, is registered in this network namespace)",
                Some(libc::EOPNOTSUPP) => " (a radio with several channels exists: load mac80211_hwsim with radios=0)",
                _ => "",
            };
            anyhow::anyhow!("mac80211_hwsim refused the registration: {e}{why}")
        })?;
        data.set_nonblocking().context("hwsim socket")?;
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        let radios = bringup::bring_up(specs, &self.0, threads)?;
        let macs: Vec<[u8; 6]> = config.medium.nodes.iter().map(|node| node.mac_address.0).collect();
        let inodes = radios.inodes().to_vec();
        debug_assert_eq!(inodes.len(), config.medium.nodes.len());
        let port = HwsimPort {
            node_by_mac: macs.iter().enumerate().map(|(i, mac)| (*mac, i)).collect(),
            radios_config: config.medium.nodes.iter().map(|node| node.radio.clone()).collect(),
            pending: VecDeque::new(),
            data,
            _radios: radios,
            macs,
        };
        Ok((port, inodes))
    }
}

/// The medium's side of hwsim: one socket registered as the medium (token 0).
pub struct HwsimPort {
    data: HwsimSocket,
    /// The radios and namespaces (dropped after the socket).
    _radios: bringup::Radios,
    node_by_mac: HashMap<[u8; 6], NodeId>,
    macs: Vec<[u8; 6]>,
    /// The radios' model configuration at start (rates for RX_RATE).
    radios_config: Vec<RadioConfig>,
    /// Messages read but not handled yet.
    pending: VecDeque<HwsimMessage>,
}

/// Bit rates of the 2.4 GHz band in mac80211_hwsim's table order, and of the
/// 5 GHz band (OFDM only), in bit/s: HWSIM_ATTR_RX_RATE is an index into them.
const RATES_2GHZ: [u64; 12] = [
    1_000_000, 2_000_000, 5_500_000, 11_000_000, 6_000_000, 9_000_000, 12_000_000, 18_000_000, 24_000_000, 36_000_000,
    48_000_000, 54_000_000,
];
const RATES_5GHZ: [u64; 8] =
    [6_000_000, 9_000_000, 12_000_000, 18_000_000, 24_000_000, 36_000_000, 48_000_000, 54_000_000];

/// The rate index a receiver reports for a frame sent at `rate_bps` on
/// `frequency_mhz` (0, the slowest rate, when the band has no such rate).
pub fn rate_index(frequency_mhz: u32, rate_bps: u64) -> u32 {
    let table: &[u64] = if frequency_mhz < 3000 { &RATES_2GHZ } else { &RATES_5GHZ };
    table.iter().position(|&r| r == rate_bps).unwrap_or(0) as u32
}

/// The rate table of a transmit status: `attempts` spread over the entries
/// mac80211 asked for, each up to its count, the rest on the last one used.
pub fn attempts_table(asked: &[TxRate; MAX_RATES], attempts: u32) -> [TxRate; MAX_RATES] {
    let mut table = [TxRate { idx: -1, count: 0 }; MAX_RATES];
    let mut left = attempts;
    let mut last = None;
    for (i, rate) in asked.iter().enumerate() {
        if rate.idx < 0 || left == 0 {
            break;
        }
        let used = left.min(u32::from(rate.count.max(1)));
        table[i] = TxRate { idx: rate.idx, count: used as u8 };
        left -= used;
        last = Some(i);
    }
    match last {
        Some(i) => table[i].count = (u32::from(table[i].count) + left).min(255) as u8,
        // Never sent (queue drop), or no usable entry: report the first rate with no attempt.
        None => table[0] = TxRate { idx: asked[0].idx.max(0), count: 0 },
    }
    table
}

impl HwsimPort {
    /// A frame from a radio that is not one of ours: tell its sender it failed.
    fn refuse(&mut self, transmitter: [u8; 6], cookie: u64, flags: u32, rates: [TxRate; MAX_RATES]) {
        let message = HwsimMessage {
            cmd: CMD_TX_INFO_FRAME,
            attrs: vec![
                Attr::AddrTransmitter(transmitter),
                Attr::Flags(flags & !genl::TX_STAT_ACK),
                Attr::Cookie(cookie),
                Attr::Signal(0),
                Attr::TxInfo(attempts_table(&rates, 0)),
            ],
        };
        let _ = self.data.send(message, false);
    }

    /// The model's frame for a HWSIM_CMD_FRAME message.
    fn inbound(&mut self, message: HwsimMessage) -> Option<Inbound<Payload>> {
        let (mut transmitter, mut mpdu, mut flags, mut cookie, mut rates, mut frequency_mhz) =
            (None, None, 0, None, [TxRate { idx: -1, count: 0 }; MAX_RATES], 0);
        for attr in message.attrs {
            match attr {
                Attr::AddrTransmitter(a) => transmitter = Some(a),
                Attr::Frame(f) => mpdu = Some(f),
                Attr::Flags(f) => flags = f,
                Attr::Cookie(c) => cookie = Some(c),
                Attr::TxInfo(r) => rates = r,
                Attr::Freq(f) => frequency_mhz = f,
                _ => {}
            }
        }
        let (transmitter, mpdu, cookie) = (transmitter?, mpdu?, cookie?);
        let Some(&node) = self.node_by_mac.get(&transmitter) else {
            self.refuse(transmitter, cookie, flags, rates);
            return None;
        };
        let Some(header) = frame::parse(&mpdu) else {
            self.refuse(transmitter, cookie, flags, rates);
            return None;
        };
        let dst = if header.group {
            Dest::Broadcast
        } else {
            self.node_by_mac.get(&header.receiver).map_or(Dest::Unknown, |&j| Dest::Node(j))
        };
        let mpdu_bytes = mpdu.len() as u32 + frame::FCS_BYTES;
        let payload = Arc::new(HwsimFrame {
            transmitter,
            cookie,
            flags,
            rates,
            frequency_mhz,
            network_len: header.network_len,
            mpdu,
        });
        Some(Inbound { node, frame: Frame { dst, len: header.network_len, carries: PacketKind::Data, payload }, mpdu_bytes })
    }
}

impl Port for HwsimPort {
    type Payload = Payload;

    fn register(&self, epoll: &Epoll) -> anyhow::Result<()> {
        epoll.add(self.data.socket(), EpollEvent::new(EpollFlags::EPOLLIN, 0)).context("epoll add hwsim socket")?;
        Ok(())
    }

    fn read_frame(&mut self, _token: u64) -> Option<Inbound<Payload>> {
        loop {
            while let Some(message) = self.pending.pop_front() {
                if message.cmd == CMD_FRAME {
                    if let Some(inbound) = self.inbound(message) {
                        return Some(inbound);
                    }
                }
            }
            match self.data.receive() {
                Ok(incoming) => {
                    // Acknowledgements are errors for our own messages: a
                    // status for a frame hwsim already dropped, a receiver
                    // that is gone. Nothing to do about them.
                    self.pending.extend(incoming.into_iter().filter_map(|i| match i {
                        Incoming::Message(m) => Some(m),
                        Incoming::Ack { .. } => None,
                    }));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return None,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // ENOBUFS: the kernel dropped messages for us; the frames are lost.
                    if e.raw_os_error() != Some(libc::ENOBUFS) {
                        eprintln!("meshemu-medium: reading the hwsim socket: {e}");
                    }
                    return None;
                }
            }
        }
    }

    fn deliver(&mut self, delivery: Delivery<'_, Payload>) -> bool {
        let frame = delivery.payload;
        let radio = &self.radios_config[delivery.from];
        let rate =
            if frame::parse(&frame.mpdu).is_some_and(|h| h.group) { radio.basic_rate_bps } else { radio.data_rate_bps };
        let message = HwsimMessage {
            cmd: CMD_FRAME,
            attrs: vec![
                Attr::AddrReceiver(self.macs[delivery.node]),
                Attr::Frame(frame.mpdu.clone()),
                Attr::RxRate(rate_index(frame.frequency_mhz, rate)),
                Attr::Signal(delivery.rx_power_dbm.round() as i32),
                Attr::Freq(frame.frequency_mhz),
            ],
        };
        self.data.send(message, false).is_ok()
    }

    fn tx_done(&mut self, medium: &Medium<Payload>, node: NodeId, payload: &Payload, outcome: &TxOutcome) {
        let (acked, attempts) = match *outcome {
            TxOutcome::Acked { data_attempts, .. } => (true, data_attempts),
            TxOutcome::Broadcast => (false, 1),
            TxOutcome::RetryDrop { data_attempts, .. } => (false, data_attempts),
            TxOutcome::QueueDrop | TxOutcome::LinkDrop => (false, 0),
        };
        // The ACK's signal at the sender: the last frame it decoded from the receiver.
        let ack_signal = match frame::parse(&payload.mpdu).and_then(|h| self.node_by_mac.get(&h.receiver)) {
            Some(&peer) if acked => medium.peer_stats(node, peer).last_rx_power_mdbm / 1000,
            _ => 0,
        };
        let flags = if acked { payload.flags | genl::TX_STAT_ACK } else { payload.flags & !genl::TX_STAT_ACK };
        let message = HwsimMessage {
            cmd: CMD_TX_INFO_FRAME,
            attrs: vec![
                Attr::AddrTransmitter(payload.transmitter),
                Attr::Flags(flags),
                Attr::Cookie(payload.cookie),
                Attr::Signal(ack_signal),
                Attr::TxInfo(attempts_table(&payload.rates, attempts)),
            ],
        };
        let _ = self.data.send(message, false);
    }

    fn network_len(payload: &Payload) -> usize {
        payload.network_len as usize
    }

    fn air_body(payload: &Payload) -> AirBody<'_> {
        AirBody::Mpdu(&payload.mpdu)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(idx: i8, count: u8) -> TxRate {
        TxRate { idx, count }
    }

    #[test]
    fn attempts_fill_the_asked_rates_in_order_and_the_rest_goes_on_the_last() {
        let asked = [rate(3, 2), rate(1, 2), rate(0, 3), rate(-1, 0)];
        assert_eq!(attempts_table(&asked, 1), [rate(3, 1), rate(-1, 0), rate(-1, 0), rate(-1, 0)]);
        assert_eq!(attempts_table(&asked, 3), [rate(3, 2), rate(1, 1), rate(-1, 0), rate(-1, 0)]);
        assert_eq!(attempts_table(&asked, 11), [rate(3, 2), rate(1, 2), rate(0, 7), rate(-1, 0)]);
        assert_eq!(attempts_table(&asked, 0), [rate(3, 0), rate(-1, 0), rate(-1, 0), rate(-1, 0)]);
        let no_table = [rate(-1, 0); MAX_RATES];
        assert_eq!(attempts_table(&no_table, 2)[0], rate(0, 0));
    }

    #[test]
    fn receive_rates_are_indices_into_the_band_table() {
        assert_eq!(rate_index(2412, 1_000_000), 0);
        assert_eq!(rate_index(2412, 2_000_000), 1);
        assert_eq!(rate_index(2412, 54_000_000), 11);
        assert_eq!(rate_index(5180, 6_000_000), 0);
        assert_eq!(rate_index(5180, 54_000_000), 7);
        assert_eq!(rate_index(5180, 2_000_000), 0, "no DSSS rates at 5 GHz");
    }
}
