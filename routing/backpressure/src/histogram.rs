//! A small log-scale histogram of durations (per-packet processing time).

use serde::Serialize;

/// Upper bucket edges, ns (1-2-5 steps from 100 ns to 1 s); one more bucket
/// counts everything from 1 s up.
const EDGES_NS: [u64; 22] = [
    100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000, 500_000, 1_000_000, 2_000_000,
    5_000_000, 10_000_000, 20_000_000, 50_000_000, 100_000_000, 200_000_000, 500_000_000, 1_000_000_000,
];

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Histogram {
    counts: [u64; EDGES_NS.len() + 1],
    total: u64,
    sum_ns: u64,
    max_ns: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { counts: [0; EDGES_NS.len() + 1], total: 0, sum_ns: 0, max_ns: 0 }
    }
}

#[derive(Debug, Serialize, PartialEq)]
pub struct Bucket {
    /// Upper edge (exclusive); null for the last, open bucket.
    pub lt_ns: Option<u64>,
    pub count: u64,
}

/// What the daemon writes: quantiles are the upper edge of their bucket
/// (at most the maximum).
#[derive(Debug, Serialize, PartialEq)]
pub struct HistogramReport {
    pub count: u64,
    pub mean_ns: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    pub buckets: Vec<Bucket>,
}

impl Histogram {
    pub fn record(&mut self, ns: u64) {
        let bucket = EDGES_NS.iter().position(|edge| ns < *edge).unwrap_or(EDGES_NS.len());
        self.counts[bucket] += 1;
        self.total += 1;
        self.sum_ns = self.sum_ns.saturating_add(ns);
        self.max_ns = self.max_ns.max(ns);
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((self.total as f64 * q).ceil() as u64).max(1);
        let mut seen = 0;
        for (bucket, count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return EDGES_NS.get(bucket).copied().unwrap_or(self.max_ns).min(self.max_ns);
            }
        }
        self.max_ns
    }

    pub fn report(&self) -> HistogramReport {
        HistogramReport {
            count: self.total,
            mean_ns: self.sum_ns.checked_div(self.total).unwrap_or(0),
            p50_ns: self.quantile(0.5),
            p99_ns: self.quantile(0.99),
            max_ns: self.max_ns,
            buckets: self
                .counts
                .iter()
                .enumerate()
                .filter(|(_, count)| **count > 0)
                .map(|(bucket, count)| Bucket { lt_ns: EDGES_NS.get(bucket).copied(), count: *count })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_bucket_edges_capped_at_the_maximum() {
        let mut h = Histogram::default();
        for _ in 0..98 {
            h.record(1_500);
        }
        h.record(30_000);
        h.record(3_000_000_000);
        let r = h.report();
        assert_eq!((r.count, r.p50_ns, r.p99_ns, r.max_ns), (100, 2_000, 50_000, 3_000_000_000));
        assert_eq!(r.buckets.last().unwrap(), &Bucket { lt_ns: None, count: 1 });
        let mut small = Histogram::default();
        small.record(150);
        assert_eq!(small.report().p50_ns, 150, "never above the maximum");
        assert_eq!(Histogram::default().report().p99_ns, 0);
    }
}
