//! Air capture as a wrapper around a port, as smoltcp's `PcapWriter` wraps a
//! device: frames pass through to the port unchanged, and while a capture
//! runs, every transmission the model puts on the air (RTS, CTS, data, ACK,
//! each attempt) is written to a pcap file (`pcap.rs`).

use std::fs;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use meshemu_model::{AirFrame, Dest, Medium, NodeId, RadioConfig, Time, TxOutcome};

use super::{Delivery, Inbound, Port};
use crate::pcap::{AirBody, AirRecord, PcapWriter};

/// A running capture is flushed to its file at least this often.
const FLUSH_NS: u64 = 200_000_000;

/// A port whose air can be captured.
pub struct Capture<T: Port> {
    port: T,
    macs: Vec<[u8; 6]>,
    file: Option<CaptureFile>,
}

struct CaptureFile {
    writer: PcapWriter<BufWriter<fs::File>>,
    path: PathBuf,
    frames: u64,
    last_flush: Time,
}

impl<T: Port> Capture<T> {
    /// `port`, its nodes' MAC addresses in node order; no capture running.
    pub fn new(port: T, macs: Vec<[u8; 6]>) -> Self {
        Capture { port, macs, file: None }
    }

    /// The file of the running capture.
    pub fn path(&self) -> Option<&Path> {
        self.file.as_ref().map(|file| file.path.as_path())
    }

    /// Starts capturing into a new file at `path` (ending a running capture),
    /// with timestamps from `epoch_ns`, the wall clock at model time 0.
    pub fn start(&mut self, path: &Path, epoch_ns: u64, now: Time) -> Result<(), String> {
        let file = fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let writer = PcapWriter::new(BufWriter::new(file), epoch_ns).map_err(|e| format!("{}: {e}", path.display()))?;
        self.stop();
        self.file = Some(CaptureFile { writer, path: path.to_owned(), frames: 0, last_flush: now });
        Ok(())
    }

    /// Ends a running capture; returns (path, frames written).
    pub fn stop(&mut self) -> Option<(PathBuf, u64)> {
        let mut file = self.file.take()?;
        if let Err(e) = file.writer.flush() {
            eprintln!("meshemu-medium: capture {}: {e}", file.path.display());
        }
        Some((file.path, file.frames))
    }

    /// Writes a transmission whose transmitter's radio is `radio`; returns
    /// true if a write error ended the capture.
    #[must_use]
    pub fn record(&mut self, time: Time, frame: &AirFrame<T::Payload>, radio: &RadioConfig) -> bool {
        let Some(file) = self.file.as_mut() else {
            return false;
        };
        let body = frame.payload.as_ref().map_or(AirBody::None, T::air_body);
        let receiver = match frame.dst {
            Dest::Node(j) => self.macs[j],
            Dest::Broadcast => [0xff; 6],
            Dest::Unknown => body.receiver(),
        };
        let record = AirRecord {
            time_ns: time,
            kind: frame.kind,
            receiver,
            transmitter: self.macs[frame.src],
            duration_us: frame.duration_us,
            retry: frame.retry,
            seq: frame.seq,
            rate_bps: frame.rate_bps,
            frequency_mhz: (radio.frequency_hz / 1e6).round().clamp(0.0, 65535.0) as u16,
            ofdm: radio.phy == meshemu_model::Phy::Ofdm,
            short_preamble: radio.preamble == meshemu_model::config::Preamble::Short,
            signal_dbm: radio.tx_power_dbm.round().clamp(-128.0, 127.0) as i8,
            body,
        };
        if let Err(e) = file.writer.write(&record) {
            eprintln!("meshemu-medium: capture {}: {e}; capture stopped", file.path.display());
            self.stop();
            return true;
        }
        file.frames += 1;
        false
    }

    /// Flushes a running capture when it is due; returns true if an error
    /// ended the capture.
    #[must_use]
    pub fn flush_if_due(&mut self, now: Time) -> bool {
        let Some(file) = self.file.as_mut() else {
            return false;
        };
        if now.saturating_sub(file.last_flush) >= FLUSH_NS {
            file.last_flush = now;
            if let Err(e) = file.writer.flush() {
                eprintln!("meshemu-medium: capture {}: {e}; capture stopped", file.path.display());
                self.stop();
                return true;
            }
        }
        false
    }
}

impl<T: Port> Port for Capture<T> {
    type Payload = T::Payload;

    fn register(&self, epoll: &nix::sys::epoll::Epoll) -> anyhow::Result<()> {
        self.port.register(epoll)
    }

    fn read_frame(&mut self, token: u64) -> Option<Inbound<Self::Payload>> {
        self.port.read_frame(token)
    }

    fn deliver(&mut self, delivery: Delivery<'_, Self::Payload>) -> bool {
        self.port.deliver(delivery)
    }

    fn tx_done(&mut self, medium: &Medium<Self::Payload>, node: NodeId, payload: &Self::Payload, outcome: &TxOutcome) {
        self.port.tx_done(medium, node, payload, outcome)
    }

    fn network_len(payload: &Self::Payload) -> usize {
        T::network_len(payload)
    }

    fn air_body(payload: &Self::Payload) -> AirBody<'_> {
        T::air_body(payload)
    }
}
