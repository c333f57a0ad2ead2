//! PHY arithmetic: frame sizes, airtime, MAC timings derived from the PHY,
//! and propagation (received power as a function of distance).

use serde::{Deserialize, Serialize};

use crate::config::{Preamble, Propagation, RadioConfig};
use crate::Time;

/// Speed of light in vacuum, m/s.
pub const SPEED_OF_LIGHT: f64 = 299_792_458.0;

/// MAC header of a data frame (3 addresses, no QoS).
pub const MAC_HEADER_BYTES: u32 = 24;
/// LLC/SNAP header in front of the network-layer packet.
pub const LLC_SNAP_BYTES: u32 = 8;
pub const FCS_BYTES: u32 = 4;
pub const RTS_BYTES: u32 = 20;
pub const CTS_BYTES: u32 = 14;
pub const ACK_BYTES: u32 = 14;
/// The largest packet a TDMA slot must hold (the TAP MTU).
pub const TDMA_MAX_PACKET_BYTES: u32 = 1500;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phy {
    /// 802.11b DSSS/CCK.
    Dsss,
    /// 802.11a/g OFDM.
    Ofdm,
}

impl Phy {
    /// The name in the configuration (`dsss`, `ofdm`).
    pub fn name(self) -> &'static str {
        match self {
            Phy::Dsss => "dsss",
            Phy::Ofdm => "ofdm",
        }
    }
}

/// The PHY's data rates: the one table of them (the control plane learns
/// of a rate outside it from the medium's validation).
pub fn rates_bps(phy: Phy) -> &'static [u64] {
    match phy {
        Phy::Dsss => &[1_000_000, 2_000_000, 5_500_000, 11_000_000],
        Phy::Ofdm => &[6_000_000, 9_000_000, 12_000_000, 18_000_000, 24_000_000, 36_000_000, 48_000_000, 54_000_000],
    }
}

/// MPDU bytes of a data frame carrying a network-layer packet of `len` bytes.
pub fn data_mpdu_bytes(len: u32) -> u32 {
    MAC_HEADER_BYTES + LLC_SNAP_BYTES + len + FCS_BYTES
}

fn div_ceil_u128(a: u128, b: u128) -> u128 {
    a.div_ceil(b)
}

/// Preamble + PLCP header time, i.e. the PHY-RX-START delay.
pub fn plcp_ns(radio: &RadioConfig) -> Time {
    match radio.phy {
        Phy::Dsss => match radio.preamble {
            Preamble::Long => 144_000 + 48_000,
            Preamble::Short => 72_000 + 24_000,
        },
        Phy::Ofdm => 16_000 + 4_000,
    }
}

/// Airtime of an MPDU of `bytes` at `rate_bps`, preamble and PLCP header
/// included (and the OFDM signal extension).
pub fn airtime_ns(radio: &RadioConfig, bytes: u32, rate_bps: u64) -> Time {
    let bits = 8 * bytes as u128;
    match radio.phy {
        Phy::Dsss => {
            // 1 and 2 Mbit/s divide exactly; CCK 5.5 and 11 round up to whole µs.
            let payload_us = div_ceil_u128(bits * 1_000_000, rate_bps as u128);
            plcp_ns(radio) + (payload_us as u64) * 1_000
        }
        Phy::Ofdm => {
            let bits_per_symbol = rate_bps as u128 * 4 / 1_000_000;
            let symbols = div_ceil_u128(16 + bits + 6, bits_per_symbol) as u64;
            plcp_ns(radio) + symbols * 4_000 + radio.signal_extension_ns
        }
    }
}

/// DCF timings of one radio, derived once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MacTimings {
    pub slot: Time,
    pub sifs: Time,
    pub difs: Time,
    pub eifs: Time,
    /// CTS and ACK timeout: SIFS + slot + PHY-RX-START delay of the response.
    pub response_timeout: Time,
    pub rts: Time,
    pub cts: Time,
    pub ack: Time,
}

impl MacTimings {
    pub fn new(radio: &RadioConfig) -> Self {
        let sifs = radio.sifs_ns;
        let slot = radio.slot_ns;
        let difs = sifs + 2 * slot;
        let ack = airtime_ns(radio, ACK_BYTES, radio.basic_rate_bps);
        let cts = airtime_ns(radio, CTS_BYTES, radio.basic_rate_bps);
        let rts = airtime_ns(radio, RTS_BYTES, radio.basic_rate_bps);
        MacTimings { slot, sifs, difs, eifs: sifs + ack + difs, response_timeout: sifs + slot + plcp_ns(radio), rts, cts, ack }
    }
}

/// Time a TDMA slot needs for a unicast packet of `len` bytes: DATA + SIFS + ACK
/// + two slots of guard.
pub fn tdma_exchange_ns(radio: &RadioConfig, len: u32) -> Time {
    tdma_mpdu_exchange_ns(radio, data_mpdu_bytes(len))
}

/// [`tdma_exchange_ns`] for a data frame of `mpdu` bytes.
pub fn tdma_mpdu_exchange_ns(radio: &RadioConfig, mpdu: u32) -> Time {
    let t = MacTimings::new(radio);
    airtime_ns(radio, mpdu, radio.data_rate_bps) + t.sifs + t.ack + 2 * t.slot
}

pub fn dbm_to_mw(dbm: f64) -> f64 {
    10f64.powf(dbm / 10.0)
}

pub fn mw_to_dbm(mw: f64) -> f64 {
    10.0 * mw.log10()
}

pub fn distance(a: [f64; 3], b: [f64; 3]) -> f64 {
    let d = [a[0] - b[0], a[1] - b[1], a[2] - b[2]];
    (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt()
}

/// Propagation delay over `d` metres, in whole ns.
pub fn propagation_delay_ns(d: f64) -> Time {
    (d / SPEED_OF_LIGHT * 1e9).round() as Time
}

/// Median received power in dBm (no random shadowing) at a receiver `d` metres
/// from the transmitter, with the transmitter's propagation model and
/// frequency. Antenna heights are above the node positions' z (flat ground
/// at z = 0). The path gain is capped at 0 dB so that co-located nodes get
/// the transmit power, not infinity.
pub fn median_rx_power_dbm(tx: &RadioConfig, tx_z: f64, rx: &RadioConfig, rx_z: f64, d: f64) -> f64 {
    let lambda = SPEED_OF_LIGHT / tx.frequency_hz;
    let friis_gain_db = |d: f64| 20.0 * (lambda / (4.0 * std::f64::consts::PI * d)).log10();
    let path_gain_db = match tx.propagation {
        Propagation::FreeSpace => friis_gain_db(d),
        Propagation::TwoRayGround => {
            let ht = tx.antenna_height_m + tx_z;
            let hr = rx.antenna_height_m + rx_z;
            let crossover = 4.0 * std::f64::consts::PI * ht * hr / lambda;
            if d <= crossover {
                friis_gain_db(d)
            } else {
                10.0 * ((ht * ht * hr * hr) / d.powi(4)).log10()
            }
        }
        Propagation::LogDistance { exponent, reference_distance_m }
        | Propagation::Shadowing { exponent, reference_distance_m, .. } => {
            if d <= reference_distance_m {
                friis_gain_db(d)
            } else {
                friis_gain_db(reference_distance_m) - 10.0 * exponent * (d / reference_distance_m).log10()
            }
        }
    };
    let path_gain_db = if path_gain_db.is_nan() { 0.0 } else { path_gain_db.min(0.0) };
    tx.tx_power_dbm + tx.antenna_gain_dbi + rx.antenna_gain_dbi - tx.system_loss_db + path_gain_db
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::config::{Preamble, Propagation};

    /// The ns-2 WaveLAN radio (two-ray ground, 914 MHz, 2 Mbit/s).
    pub fn wavelan() -> RadioConfig {
        RadioConfig {
            phy: Phy::Dsss,
            data_rate_bps: 2_000_000,
            basic_rate_bps: 1_000_000,
            preamble: Preamble::Long,
            signal_extension_ns: 0,
            frequency_hz: 914e6,
            tx_power_dbm: mw_to_dbm(281.83815),
            antenna_gain_dbi: 0.0,
            antenna_height_m: 1.5,
            system_loss_db: 0.0,
            propagation: Propagation::TwoRayGround,
            rx_threshold_dbm: mw_to_dbm(3.652e-7),
            cs_threshold_dbm: mw_to_dbm(1.559e-8),
            capture_threshold_db: 10.0,
            capture_restart: false,
            noise_floor_dbm: -101.0,
            interference_floor_dbm: mw_to_dbm(1.559e-8),
            bit_error_rate: 0.0,
            slot_ns: 20_000,
            sifs_ns: 10_000,
            cw_min: 31,
            cw_max: 1023,
            rts_threshold_bytes: 0,
            short_retry_limit: 7,
            long_retry_limit: 4,
            queue_len: 50,
            queue_priority: true,
            receive_during_tx: false,
            eifs_nav: false,
            responses_need_idle: false,
            retry_drop_flush: false,
        }
    }

    #[test]
    fn wavelan_receive_range_is_250m_and_carrier_sense_range_550m() {
        let r = wavelan();
        let p = |d| median_rx_power_dbm(&r, 0.0, &r, 0.0, d);
        assert!(p(249.9) >= r.rx_threshold_dbm);
        assert!(p(250.1) < r.rx_threshold_dbm);
        assert!(p(549.9) >= r.cs_threshold_dbm);
        assert!(p(550.1) < r.cs_threshold_dbm);
    }

    #[test]
    fn two_ray_ground_is_friis_below_crossover_and_continuous_at_it() {
        let r = wavelan();
        let lambda = SPEED_OF_LIGHT / r.frequency_hz;
        let crossover = 4.0 * std::f64::consts::PI * 1.5 * 1.5 / lambda;
        assert!((crossover - 86.14).abs() < 0.1, "crossover {crossover}");
        let mut fs = r.clone();
        fs.propagation = Propagation::FreeSpace;
        let at = |r: &RadioConfig, d| median_rx_power_dbm(r, 0.0, r, 0.0, d);
        assert_eq!(at(&r, 50.0), at(&fs, 50.0));
        assert!((at(&r, crossover * 0.9999) - at(&r, crossover * 1.0001)).abs() < 0.01);
        // Beyond the crossover the two-ray power falls as d^-4: 12 dB per doubling.
        assert!((at(&r, 200.0) - at(&r, 400.0) - 12.04).abs() < 0.01);
    }

    #[test]
    fn log_distance_falls_by_exponent_decades_beyond_reference() {
        let mut r = wavelan();
        r.propagation = Propagation::LogDistance { exponent: 3.0, reference_distance_m: 1.0 };
        let at = |d| median_rx_power_dbm(&r, 0.0, &r, 0.0, d);
        assert!((at(10.0) - at(100.0) - 30.0).abs() < 1e-9);
        let mut fs = r.clone();
        fs.propagation = Propagation::FreeSpace;
        assert_eq!(at(0.5), median_rx_power_dbm(&fs, 0.0, &fs, 0.0, 0.5));
    }

    #[test]
    fn colocated_nodes_receive_transmit_power() {
        let r = wavelan();
        assert_eq!(median_rx_power_dbm(&r, 0.0, &r, 0.0, 0.0), r.tx_power_dbm);
    }

    #[test]
    fn dsss_airtime_has_192us_long_preamble_and_rounds_cck_up() {
        let mut r = wavelan();
        // 1460-byte packet: 1496-byte MPDU at 2 Mbit/s = 5984 µs + 192 µs.
        assert_eq!(airtime_ns(&r, data_mpdu_bytes(1460), 2_000_000), 6_176_000);
        assert_eq!(airtime_ns(&r, ACK_BYTES, 1_000_000), 304_000);
        // 11 Mbit/s: 1496·8/11 = 1088.0 µs exactly? 11968/11 = 1088 → 1088 µs.
        assert_eq!(airtime_ns(&r, 1496, 11_000_000), 192_000 + 1_088_000);
        // 100 bytes at 5.5: 800/5.5 = 145.45 → 146 µs.
        assert_eq!(airtime_ns(&r, 100, 5_500_000), 192_000 + 146_000);
        r.preamble = Preamble::Short;
        assert_eq!(airtime_ns(&r, ACK_BYTES, 2_000_000), 96_000 + 56_000);
    }

    #[test]
    fn ofdm_airtime_counts_whole_symbols_and_signal_extension() {
        let mut r = wavelan();
        r.phy = Phy::Ofdm;
        // ACK at 6 Mbit/s: 16 + 112 + 6 = 134 bits / 24 per symbol = 6 symbols.
        assert_eq!(airtime_ns(&r, ACK_BYTES, 6_000_000), 20_000 + 24_000);
        // 1536 bytes at 54 Mbit/s: 12310 bits / 216 = 56.99 → 57 symbols.
        r.signal_extension_ns = 6_000;
        assert_eq!(airtime_ns(&r, 1536, 54_000_000), 20_000 + 57 * 4_000 + 6_000);
    }

    #[test]
    fn dcf_timings_follow_the_standard() {
        let t = MacTimings::new(&wavelan());
        assert_eq!(t.difs, 50_000);
        assert_eq!(t.eifs, 10_000 + 304_000 + 50_000);
        assert_eq!(t.response_timeout, 10_000 + 20_000 + 192_000);
        assert_eq!(t.rts, 192_000 + 160_000);
    }
}
