//! Command-line values with units, as meshemu's files write them.

use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
#[error("bad {what} '{text}': {reason}")]
pub struct UnitError {
    what: &'static str,
    text: String,
    reason: String,
}

fn split(text: &str) -> (&str, &str) {
    let end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == 'e' || c == 'E' || c == '-' || c == '+'))
        .unwrap_or(text.len());
    // "1e3B" is fine; but a unit starting with e/E ("..") does not exist here.
    (&text[..end], text[end..].trim())
}

fn parse(what: &'static str, text: &str, units: &[(&str, f64)], bare: Option<f64>) -> Result<f64, UnitError> {
    let error = |reason: String| UnitError { what, text: text.to_owned(), reason };
    let (number, unit) = split(text.trim());
    let value: f64 = number.parse().map_err(|_| error("expected a number and a unit".into()))?;
    if !value.is_finite() || value < 0.0 {
        return Err(error("must be a finite, non-negative number".into()));
    }
    let factor = if unit.is_empty() {
        bare.ok_or_else(|| error(format!("missing unit (one of {})", names(units))))?
    } else {
        units
            .iter()
            .find(|(name, _)| *name == unit)
            .map(|(_, factor)| *factor)
            .ok_or_else(|| error(format!("unknown unit '{unit}' (one of {})", names(units))))?
    };
    Ok(value * factor)
}

fn names(units: &[(&str, f64)]) -> String {
    units.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(", ")
}

/// A rate in bit/s: `2Mbps`, `800KB/s`, `64kbps`, or a bare number of bit/s.
pub fn parse_rate_bps(text: &str) -> Result<u64, UnitError> {
    let units = [
        ("bps", 1.0),
        ("kbps", 1e3),
        ("Mbps", 1e6),
        ("Gbps", 1e9),
        ("B/s", 8.0),
        ("KB/s", 8e3),
        ("kB/s", 8e3),
        ("MB/s", 8e6),
    ];
    let value = parse("rate", text, &units, Some(1.0))?.round();
    if !(1.0..=1e12).contains(&value) {
        return Err(UnitError { what: "rate", text: text.into(), reason: "must be between 1 bit/s and 1 Tbit/s".into() });
    }
    Ok(value as u64)
}

/// A size in bytes: `1460`, `1460B`, `1KB`, `1KiB`.
pub fn parse_size_bytes(text: &str) -> Result<u64, UnitError> {
    let units = [("B", 1.0), ("KB", 1e3), ("kB", 1e3), ("KiB", 1024.0)];
    let value = parse("size", text, &units, Some(1.0))?;
    if value.fract() != 0.0 || value > 65_507.0 {
        return Err(UnitError {
            what: "size",
            text: text.into(),
            reason: "must be a whole number of bytes up to 65507 (the largest UDP payload)".into(),
        });
    }
    Ok(value as u64)
}

/// A duration in ns: `10s`, `500ms`, `20us`, `1000ns`.
pub fn parse_duration_ns(text: &str) -> Result<u64, UnitError> {
    let units = [("s", 1e9), ("ms", 1e6), ("us", 1e3), ("ns", 1.0)];
    let value = parse("duration", text, &units, None)?.round();
    if value > 1e18 {
        return Err(UnitError { what: "duration", text: text.into(), reason: "too long".into() });
    }
    Ok(value as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse_rate_bps("2Mbps"), Ok(2_000_000));
        assert_eq!(parse_rate_bps("800KB/s"), Ok(6_400_000));
        assert_eq!(parse_rate_bps("1500"), Ok(1500));
        assert_eq!(parse_size_bytes("1460B"), Ok(1460));
        assert_eq!(parse_size_bytes("1KiB"), Ok(1024));
        assert_eq!(parse_duration_ns("1.5s"), Ok(1_500_000_000));
        assert_eq!(parse_duration_ns("20us"), Ok(20_000));
    }

    #[test]
    fn bad_values_name_the_problem() {
        assert!(parse_rate_bps("fast").unwrap_err().to_string().contains("expected a number"));
        assert!(parse_rate_bps("2Mbit").unwrap_err().to_string().contains("unknown unit 'Mbit'"));
        assert!(parse_duration_ns("10").unwrap_err().to_string().contains("missing unit"));
        assert!(parse_size_bytes("1.5B").is_err());
        assert!(parse_size_bytes("100000").is_err());
        assert!(parse_rate_bps("-1Mbps").is_err());
    }
}
