//! The TCP throughput equation of RFC 5348 §3.1 and its inverse.
//!
//! ```text
//!                               s
//! X_Bps = ----------------------------------------------------------
//!         R*sqrt(2*b*p/3) + (t_RTO * (3*sqrt(3*b*p/8)) * p * (1+32*p^2))
//! ```
//!
//! with `b = 1` and `t_RTO = 4*R` as RFC 5348 recommends (and as the RE-TFRC
//! paper assumes for its inverse, eq. 3).

use std::time::Duration;

/// Packets acknowledged by one TCP acknowledgement (`b`); RFC 5348 says 1.
const PACKETS_PER_ACK: f64 = 1.0;

/// Smallest loss event rate the inverse returns: any finite rate maps to a
/// positive `p`, and below this `p` the equation no longer changes in `f64`.
const MIN_LOSS_EVENT_RATE: f64 = 1e-300;

/// The allowed rate in bytes/s for segment size `s` (bytes), round-trip time
/// `rtt` and loss event rate `p` (clamped to 0..=1).
///
/// Returns `f64::INFINITY` when `p` is 0 (no loss yet) or `rtt` is zero.
pub fn throughput(s: f64, rtt: Duration, p: f64) -> f64 {
    let p = p.clamp(0.0, 1.0);
    let r = rtt.as_secs_f64();
    if p == 0.0 || r == 0.0 {
        return f64::INFINITY;
    }
    s / denominator(r, p)
}

fn denominator(r: f64, p: f64) -> f64 {
    let b = PACKETS_PER_ACK;
    let t_rto = 4.0 * r;
    r * (2.0 * b * p / 3.0).sqrt()
        + t_rto * (3.0 * (3.0 * b * p / 8.0).sqrt()) * p * (1.0 + 32.0 * p * p)
}

/// The inverse `p = f̄(r, X)` (RE-TFRC paper eq. 3): the loss event rate at
/// which [`throughput`] gives `x` bytes/s for segment size `s` and `rtt`.
///
/// The equation falls strictly with `p`, so the root is found by bisection on
/// `ln p`. A rate at or below the equation's value at `p = 1` gives 1; an
/// infinite rate, or a zero `rtt`, gives the smallest representable `p`
/// (never 0, which would mean "no loss yet").
pub fn loss_event_rate_for(s: f64, rtt: Duration, x: f64) -> f64 {
    let r = rtt.as_secs_f64();
    // Zero, negative and NaN rates: the worst loss event rate.
    if x.is_nan() || x <= 0.0 {
        return 1.0;
    }
    if r == 0.0 || x.is_infinite() {
        return MIN_LOSS_EVENT_RATE;
    }
    // Solve denominator(r, p) = s / x, i.e. find where the rate falls to x.
    let target = s / x;
    if denominator(r, 1.0) <= target {
        return 1.0;
    }
    if denominator(r, MIN_LOSS_EVENT_RATE) >= target {
        return MIN_LOSS_EVENT_RATE;
    }
    let (mut lo, mut hi) = (MIN_LOSS_EVENT_RATE.ln(), 0.0_f64);
    // 100 halvings of a width under 700 leave an error far below f64 resolution.
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if denominator(r, mid.exp()) < target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (0.5 * (lo + hi)).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    /// Relative difference.
    fn rel(a: f64, b: f64) -> f64 {
        ((a - b) / b).abs()
    }

    #[test]
    fn throughput_matches_hand_computed_values() {
        // s = 1000 B, R = 100 ms, p = 0.01:
        //   R*sqrt(2p/3)                = 0.1 * 0.0816497      = 0.00816497
        //   4R * 3*sqrt(3p/8) * p * (1+32p^2)
        //                               = 0.4 * 0.1837117 * 0.01 * 1.0032 = 0.000737201
        //   X = 1000 / 0.00890217       = 112 332 B/s
        let x = throughput(1000.0, ms(100), 0.01);
        assert!(rel(x, 112_332.0) < 1e-4, "{x}");

        // s = 1460 B, R = 50 ms, p = 0.1:
        //   0.05 * sqrt(0.0666667)      = 0.0129099
        //   0.2 * 3*sqrt(0.0375) * 0.1 * 1.32 = 0.2 * 0.580948 * 0.132 = 0.0153370
        //   X = 1460 / 0.0282470        = 51 687 B/s
        let x = throughput(1460.0, ms(50), 0.1);
        assert!(rel(x, 51_687.0) < 1e-4, "{x}");

        // p = 1: 0.2*sqrt(2/3) + 0.8*3*sqrt(3/8)*33 = 0.163299 + 48.499897 → 1000/48.663196
        let x = throughput(1000.0, ms(200), 1.0);
        assert!(rel(x, 20.54941) < 1e-5, "{x}");
    }

    #[test]
    fn throughput_without_loss_or_delay_is_unbounded() {
        assert_eq!(throughput(1000.0, ms(100), 0.0), f64::INFINITY);
        assert_eq!(throughput(1000.0, Duration::ZERO, 0.5), f64::INFINITY);
    }

    #[test]
    fn throughput_falls_with_loss_and_delay() {
        let base = throughput(1000.0, ms(100), 0.01);
        assert!(throughput(1000.0, ms(100), 0.02) < base);
        assert!(throughput(1000.0, ms(200), 0.01) < base);
        assert!(throughput(2000.0, ms(100), 0.01) > base);
    }

    #[test]
    fn inverse_recovers_hand_computed_loss_event_rates() {
        // The hand-computed points above, read backwards.
        let p = loss_event_rate_for(1000.0, ms(100), 112_332.0);
        assert!(rel(p, 0.01) < 1e-3, "{p}");
        let p = loss_event_rate_for(1460.0, ms(50), 51_687.0);
        assert!(rel(p, 0.1) < 1e-3, "{p}");
    }

    #[test]
    fn inverse_round_trips_over_a_wide_range() {
        for &p in &[1e-8, 1e-6, 1e-4, 0.003, 0.05, 0.2, 0.5, 0.9] {
            for &r in &[1u64, 20, 150, 900] {
                let x = throughput(1000.0, ms(r), p);
                let back = loss_event_rate_for(1000.0, ms(r), x);
                assert!(rel(back, p) < 1e-9, "p={p} r={r} back={back}");
            }
        }
    }

    #[test]
    fn inverse_saturates_at_the_ends() {
        // Slower than the equation allows even at p = 1.
        assert_eq!(loss_event_rate_for(1000.0, ms(100), 1.0), 1.0);
        assert_eq!(loss_event_rate_for(1000.0, ms(100), 0.0), 1.0);
        // Unbounded rate: the smallest positive p, never zero.
        let p = loss_event_rate_for(1000.0, ms(100), f64::INFINITY);
        assert!(p > 0.0 && p < 1e-200);
    }
}
