//! Values with explicit units, as the command line takes them: durations
//! (`150ms`, `10s`) and bit rates (`300kbps`, `2Mbps`).

use std::time::Duration;

use thiserror::Error;

/// A value that is not a number with one of the accepted units.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("'{input}' is not a {kind}: {problem} (write e.g. {example})")]
pub struct UnitError {
    input: String,
    kind: &'static str,
    problem: &'static str,
    example: &'static str,
}

fn split_number(input: &str) -> Option<(f64, &str)> {
    let end = input
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(input.len());
    let number: f64 = input[..end].parse().ok()?;
    Some((number, input[end..].trim()))
}

/// Parses `ns`, `us`, `ms`, `s` or `min` after a non-negative number.
pub fn parse_duration(input: &str) -> Result<Duration, UnitError> {
    let error = |problem| UnitError {
        input: input.to_owned(),
        kind: "duration",
        problem,
        example: "150ms or 10s",
    };
    let (number, unit) = split_number(input.trim()).ok_or_else(|| error("no number"))?;
    let seconds = match unit {
        "ns" => number * 1e-9,
        "us" | "µs" => number * 1e-6,
        "ms" => number * 1e-3,
        "s" => number,
        "min" => number * 60.0,
        "" => return Err(error("the unit is missing")),
        _ => return Err(error("unknown unit (ns, us, ms, s, min)")),
    };
    Duration::try_from_secs_f64(seconds).map_err(|_| error("out of range"))
}

/// Parses `bps`, `kbps`, `Mbps` or `Gbps` (bits per second, powers of 1000)
/// after a positive number; returns bits per second.
pub fn parse_bit_rate(input: &str) -> Result<f64, UnitError> {
    let error = |problem| UnitError {
        input: input.to_owned(),
        kind: "bit rate",
        problem,
        example: "300kbps or 2Mbps",
    };
    let (number, unit) = split_number(input.trim()).ok_or_else(|| error("no number"))?;
    let scale = match unit {
        "bps" => 1.0,
        "kbps" | "Kbps" => 1e3,
        "Mbps" => 1e6,
        "Gbps" => 1e9,
        "" => return Err(error("the unit is missing")),
        _ => return Err(error("unknown unit (bps, kbps, Mbps, Gbps)")),
    };
    let bits = number * scale;
    if !(bits.is_finite() && bits > 0.0) {
        return Err(error("must be positive"));
    }
    Ok(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("150ms"), Ok(Duration::from_millis(150)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("2.5s"), Ok(Duration::from_millis(2500)));
        assert_eq!(parse_duration("20us"), Ok(Duration::from_micros(20)));
        assert_eq!(parse_duration("2min"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
    }

    #[test]
    fn rates() {
        assert_eq!(parse_bit_rate("300kbps"), Ok(300_000.0));
        assert_eq!(parse_bit_rate("2Mbps"), Ok(2_000_000.0));
        assert_eq!(parse_bit_rate("1.5Gbps"), Ok(1.5e9));
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let e = parse_duration("10").unwrap_err().to_string();
        assert_eq!(
            e,
            "'10' is not a duration: the unit is missing (write e.g. 150ms or 10s)"
        );
        assert!(parse_duration("10 hours")
            .unwrap_err()
            .to_string()
            .contains("unknown unit"));
        assert!(parse_duration("ms")
            .unwrap_err()
            .to_string()
            .contains("no number"));
        assert!(parse_duration("-5s").is_err());
        assert!(parse_bit_rate("0kbps")
            .unwrap_err()
            .to_string()
            .contains("positive"));
        assert!(parse_bit_rate("5")
            .unwrap_err()
            .to_string()
            .contains("unit is missing"));
        assert!(parse_bit_rate("5MB/s")
            .unwrap_err()
            .to_string()
            .contains("unknown unit"));
    }
}
