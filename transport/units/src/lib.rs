//! Values with units on the command lines of meshemu's tools, written as in
//! its YAML files: durations (`150ms`, `10s`, `2min`), rates (`300kbps`,
//! `2Mbps`, `800KB/s`) and sizes (`1460B`, `1KiB`). Decimal prefixes are
//! powers of 1000, `KiB` is 1024. A rate or size without a unit is bit/s or
//! bytes (as iperf3 reads them); a duration needs its unit.

use std::time::Duration;

use thiserror::Error;

/// A value that is not a number with one of the accepted units.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("bad {kind} '{text}': {problem} (write e.g. {example})")]
pub struct UnitError {
    kind: &'static str,
    text: String,
    problem: String,
    example: &'static str,
}

/// One kind of value: its units with their factors to the base unit.
struct Kind {
    name: &'static str,
    units: &'static [(&'static str, f64)],
    /// The factor of a bare number, if one is allowed.
    bare: Option<f64>,
    example: &'static str,
}

const DURATION: Kind = Kind {
    name: "duration",
    units: &[("ns", 1e-9), ("us", 1e-6), ("µs", 1e-6), ("ms", 1e-3), ("s", 1.0), ("min", 60.0)],
    bare: None,
    example: "150ms or 10s",
};

const RATE: Kind = Kind {
    name: "rate",
    units: &[
        ("bps", 1.0),
        ("kbps", 1e3),
        ("Kbps", 1e3),
        ("Mbps", 1e6),
        ("Gbps", 1e9),
        ("B/s", 8.0),
        ("kB/s", 8e3),
        ("KB/s", 8e3),
        ("MB/s", 8e6),
    ],
    bare: Some(1.0),
    example: "300kbps, 2Mbps or 800KB/s",
};

const SIZE: Kind = Kind {
    name: "size",
    units: &[("B", 1.0), ("kB", 1e3), ("KB", 1e3), ("KiB", 1024.0), ("MB", 1e6), ("MiB", 1_048_576.0)],
    bare: Some(1.0),
    example: "1460B or 64KiB",
};

impl Kind {
    fn error(&self, text: &str, problem: impl Into<String>) -> UnitError {
        UnitError { kind: self.name, text: text.to_owned(), problem: problem.into(), example: self.example }
    }

    /// The value in the base unit (s, bit/s, bytes): finite and not negative.
    fn parse(&self, text: &str) -> Result<f64, UnitError> {
        let trimmed = text.trim();
        let end = trimmed.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(trimmed.len());
        let (number, unit) = (&trimmed[..end], trimmed[end..].trim());
        let value: f64 = number.parse().map_err(|_| self.error(text, "expected a number and a unit"))?;
        let factor = if unit.is_empty() {
            self.bare.ok_or_else(|| self.error(text, format!("the unit is missing ({})", self.unit_names())))?
        } else {
            self.units
                .iter()
                .find(|(name, _)| *name == unit)
                .map(|(_, factor)| *factor)
                .ok_or_else(|| self.error(text, format!("unknown unit '{unit}' ({})", self.unit_names())))?
        };
        let result = value * factor;
        if !result.is_finite() {
            return Err(self.error(text, "out of range"));
        }
        Ok(result)
    }

    fn unit_names(&self) -> String {
        self.units.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(", ")
    }
}

/// `ns`, `us`, `ms`, `s` or `min` after a number; zero is allowed.
pub fn parse_duration(text: &str) -> Result<Duration, UnitError> {
    let seconds = DURATION.parse(text)?;
    Duration::try_from_secs_f64(seconds).map_err(|_| DURATION.error(text, "out of range"))
}

/// A positive rate in bit/s.
pub fn parse_rate_bps(text: &str) -> Result<f64, UnitError> {
    let bps = RATE.parse(text)?;
    if bps <= 0.0 {
        return Err(RATE.error(text, "must be positive"));
    }
    Ok(bps)
}

/// A whole number of bytes.
pub fn parse_size_bytes(text: &str) -> Result<u64, UnitError> {
    let bytes = SIZE.parse(text)?;
    if bytes.fract() != 0.0 || bytes > u64::MAX as f64 {
        return Err(SIZE.error(text, "must be a whole number of bytes"));
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("150ms"), Ok(Duration::from_millis(150)));
        assert_eq!(parse_duration("2.5s"), Ok(Duration::from_millis(2500)));
        assert_eq!(parse_duration("20us"), Ok(Duration::from_micros(20)));
        assert_eq!(parse_duration("1000ns"), Ok(Duration::from_micros(1)));
        assert_eq!(parse_duration("2min"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
    }

    #[test]
    fn rates_in_bits_and_bytes_per_second() {
        assert_eq!(parse_rate_bps("300kbps"), Ok(300_000.0));
        assert_eq!(parse_rate_bps("2Mbps"), Ok(2_000_000.0));
        assert_eq!(parse_rate_bps("1.5Gbps"), Ok(1.5e9));
        assert_eq!(parse_rate_bps("800KB/s"), Ok(6_400_000.0));
        assert_eq!(parse_rate_bps("1500"), Ok(1500.0));
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size_bytes("1460B"), Ok(1460));
        assert_eq!(parse_size_bytes("1460"), Ok(1460));
        assert_eq!(parse_size_bytes("64KiB"), Ok(65_536));
        assert_eq!(parse_size_bytes("1KB"), Ok(1000));
    }

    #[test]
    fn errors_say_what_is_wrong_and_how_to_write_it() {
        assert_eq!(
            parse_duration("10").unwrap_err().to_string(),
            "bad duration '10': the unit is missing (ns, us, µs, ms, s, min) (write e.g. 150ms or 10s)"
        );
        assert!(parse_duration("10 hours").unwrap_err().to_string().contains("unknown unit 'hours'"));
        assert!(parse_duration("ms").unwrap_err().to_string().contains("expected a number"));
        assert!(parse_duration("-5s").is_err());
        assert!(parse_rate_bps("0kbps").unwrap_err().to_string().contains("must be positive"));
        assert!(parse_rate_bps("2Mbit").unwrap_err().to_string().contains("unknown unit 'Mbit'"));
        assert!(parse_rate_bps("fast").unwrap_err().to_string().contains("expected a number"));
        assert!(parse_size_bytes("1.5B").unwrap_err().to_string().contains("whole number"));
        let huge = format!("{}Gbps", "9".repeat(400));
        assert!(parse_rate_bps(&huge).unwrap_err().to_string().contains("out of range"));
    }
}
