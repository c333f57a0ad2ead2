//! The I/O around the protocol core: the `tfrc send` and `tfrc recv` loops
//! on UDP sockets, their JSON summaries, interval reports and traces.
//!
//! The loops run on the calling thread (so a program can run them in
//! threads inside different network namespaces) and return summaries;
//! printing is the caller's business. Rates in summaries and traces are in
//! bit/s (`*_bps`), times in seconds (`*_s`) or milliseconds (`*_ms`).

mod recv;
mod send;
pub mod socket;

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Serialize;
use thiserror::Error;

pub use recv::{run_receiver, FlowEnd, FlowInterval, FlowSummary, ReceiverBinding, RecvOptions};
pub use send::{run_sender, SendOptions, SenderBinding, SenderInterval, SenderSummary};

use crate::sender::ConfigError;

/// Why a tool loop stopped with an error.
#[derive(Debug, Error)]
pub enum RunError {
    #[error("cannot bind UDP socket to {addr}: {source}")]
    Bind { addr: SocketAddr, source: io::Error },
    #[error("cannot set up the socket: {0}")]
    Socket(io::Error),
    #[error("sending to {peer}: {source}")]
    Send { peer: SocketAddr, source: io::Error },
    #[error("receiving: {0}")]
    Receive(io::Error),
    #[error("trace file {}: {source}", path.display())]
    Trace { path: PathBuf, source: io::Error },
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error("{0}")]
    Option(String),
}

/// count/min/mean/median/p90/max of a sample.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    pub count: usize,
    pub min: f64,
    pub mean: f64,
    pub median: f64,
    pub p90: f64,
    pub max: f64,
}

impl Spread {
    /// `None` for an empty sample.
    pub fn of(values: &[f64]) -> Option<Self> {
        if values.is_empty() {
            return None;
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q).round() as usize];
        Some(Self {
            count: sorted.len(),
            min: sorted[0],
            mean: sorted.iter().sum::<f64>() / sorted.len() as f64,
            median: at(0.5),
            p90: at(0.9),
            max: sorted[sorted.len() - 1],
        })
    }
}

/// count/min/mean/max kept on the fly, for per-packet values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct RunningSpread {
    pub count: u64,
    pub min: f64,
    pub mean: f64,
    pub max: f64,
}

impl RunningSpread {
    pub fn add(&mut self, value: f64) {
        if self.count == 0 {
            self.min = value;
            self.max = value;
        }
        self.count += 1;
        self.min = self.min.min(value);
        self.max = self.max.max(value);
        self.mean += (value - self.mean) / self.count as f64;
    }
}

/// A JSON-lines trace: one object per event, `t` in seconds since start.
struct Trace {
    path: PathBuf,
    out: BufWriter<File>,
}

#[derive(Serialize)]
struct TraceLine<'a, E: Serialize> {
    t: f64,
    #[serde(flatten)]
    event: &'a E,
}

impl Trace {
    fn create(path: &Path) -> Result<Self, RunError> {
        let file = File::create(path).map_err(|source| RunError::Trace {
            path: path.to_owned(),
            source,
        })?;
        Ok(Self {
            path: path.to_owned(),
            out: BufWriter::new(file),
        })
    }

    fn write<E: Serialize>(&mut self, t: f64, event: &E) -> Result<(), RunError> {
        let error = |source| RunError::Trace {
            path: self.path.clone(),
            source,
        };
        serde_json::to_writer(&mut self.out, &TraceLine { t, event })
            .map_err(|e| error(e.into()))?;
        self.out.write_all(b"\n").map_err(error)
    }

    fn finish(mut self) -> Result<(), RunError> {
        self.out.flush().map_err(|source| RunError::Trace {
            path: self.path,
            source,
        })
    }
}

/// Bytes/s to bit/s.
fn bps(bytes_per_second: f64) -> f64 {
    bytes_per_second * 8.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_of_a_sample() {
        let s = Spread::of(&[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!(
            (s.count, s.min, s.mean, s.median, s.max),
            (5, 1.0, 3.0, 3.0, 5.0)
        );
        assert_eq!(s.p90, 5.0);
        assert_eq!(Spread::of(&[]), None);
    }

    #[test]
    fn running_spread() {
        let mut r = RunningSpread::default();
        for v in [2.0, -1.0, 5.0] {
            r.add(v);
        }
        assert_eq!((r.count, r.min, r.max), (3, -1.0, 5.0));
        assert!((r.mean - 2.0).abs() < 1e-12);
    }
}
