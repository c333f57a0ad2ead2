//! How late the real-time loop carries out the model's actions: a histogram
//! with log-spaced buckets (10 per decade) from 1 µs to 1 s.

use serde::Serialize;

const BUCKETS_PER_DECADE: u32 = 10;
const DECADES: u32 = 6; // 1 µs .. 1 s
const EDGES: usize = (BUCKETS_PER_DECADE * DECADES + 1) as usize;

/// Lateness histogram. Bucket 0 holds values below 1 µs, bucket k (1..=60)
/// values in [edge(k-1), edge(k)), the last bucket 1 s and more.
#[derive(Debug, Clone)]
pub struct Histogram {
    /// Upper edges in ns: 1000·10^(k/10), k = 0..=60.
    edges: [u64; EDGES],
    counts: [u64; EDGES + 1],
    count: u64,
    max_ns: u64,
}

/// The summary the control socket reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub count: u64,
    /// Upper edge of the bucket holding the quantile (the maximum in the last bucket).
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Bucket {
    /// Values below this (ns); `None` for the last, open bucket.
    pub lt_ns: Option<u64>,
    pub count: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        let mut edges = [0u64; EDGES];
        for (k, edge) in edges.iter_mut().enumerate() {
            *edge = (1000.0 * 10f64.powf(k as f64 / f64::from(BUCKETS_PER_DECADE))).round() as u64;
        }
        Histogram { edges, counts: [0; EDGES + 1], count: 0, max_ns: 0 }
    }
}

impl Histogram {
    pub fn record(&mut self, lateness_ns: u64) {
        let bucket = self.edges.partition_point(|&edge| edge <= lateness_ns);
        self.counts[bucket] += 1;
        self.count += 1;
        self.max_ns = self.max_ns.max(lateness_ns);
    }

    /// Upper bound of the q-quantile (0 < q ≤ 1), 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (bucket, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return self.edges.get(bucket).map_or(self.max_ns, |&edge| edge.min(self.max_ns));
            }
        }
        self.max_ns
    }

    pub fn summary(&self) -> Summary {
        Summary {
            count: self.count,
            p50_ns: self.quantile(0.5),
            p99_ns: self.quantile(0.99),
            p999_ns: self.quantile(0.999),
            max_ns: self.max_ns,
        }
    }

    pub fn buckets(&self) -> Vec<Bucket> {
        self.counts
            .iter()
            .enumerate()
            .map(|(k, &count)| Bucket { lt_ns: self.edges.get(k).copied(), count })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edges_are_log_spaced_from_1us_to_1s() {
        let h = Histogram::default();
        assert_eq!(h.edges[0], 1_000);
        assert_eq!(h.edges[10], 10_000);
        assert_eq!(h.edges[5], 3_162);
        assert_eq!(h.edges[60], 1_000_000_000);
        assert_eq!(h.buckets().len(), 62);
    }

    #[test]
    fn values_land_in_their_bucket() {
        let mut h = Histogram::default();
        h.record(0);
        h.record(999);
        h.record(1_000);
        h.record(5_000_000_000);
        let b = h.buckets();
        assert_eq!(b[0].count, 2);
        assert_eq!(b[1], Bucket { lt_ns: Some(1_259), count: 1 });
        assert_eq!(b[61], Bucket { lt_ns: None, count: 1 });
        assert_eq!(h.summary().max_ns, 5_000_000_000);
    }

    #[test]
    fn quantiles_bound_the_true_value_from_above_within_a_bucket() {
        let mut h = Histogram::default();
        for v in 1..=1000u64 {
            h.record(v * 1_000); // 1 µs .. 1 ms, uniform
        }
        let s = h.summary();
        assert_eq!(s.count, 1000);
        // True p50 is 500 µs; the bucket [398 µs, 501 µs) holds it.
        assert_eq!(s.p50_ns, 501_187);
        assert!(s.p99_ns >= 990_000 && s.p99_ns <= 1_000_000, "{s:?}");
        assert_eq!(s.p999_ns, 1_000_000, "clamped to the maximum");
        assert_eq!(Histogram::default().summary().p99_ns, 0);
    }
}
