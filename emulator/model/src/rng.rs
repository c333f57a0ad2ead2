//! Seeded random streams: one per purpose and node (or pair), derived from the
//! configuration's seed, so that adding a node or a flow does not reshuffle the
//! draws of the others.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use sha2::{Digest, Sha256};

pub type Stream = ChaCha8Rng;

/// What a stream is used for; part of its derivation.
#[derive(Debug, Clone, Copy)]
pub enum Purpose {
    Backoff,
    BitErrors,
    ShadowingFrame,
    ShadowingLink,
    Mobility,
    Traffic,
}

impl Purpose {
    fn tag(self) -> &'static [u8] {
        match self {
            Purpose::Backoff => b"backoff",
            Purpose::BitErrors => b"bit-errors",
            Purpose::ShadowingFrame => b"shadowing-frame",
            Purpose::ShadowingLink => b"shadowing-link",
            Purpose::Mobility => b"mobility",
            Purpose::Traffic => b"traffic",
        }
    }
}

/// The stream for (`seed`, `purpose`, `a`, `b`); `b` is 0 where one index suffices.
pub fn stream(seed: u64, purpose: Purpose, a: u64, b: u64) -> Stream {
    let mut h = Sha256::new();
    h.update(b"meshemu-model/v1\0");
    h.update(seed.to_le_bytes());
    h.update(purpose.tag());
    h.update([0u8]);
    h.update(a.to_le_bytes());
    h.update(b.to_le_bytes());
    let digest = h.finalize();
    let mut key = [0u8; 32];
    key.copy_from_slice(&digest);
    ChaCha8Rng::from_seed(key)
}
