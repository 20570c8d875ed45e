//! The one parser for durations given on the command line (`--interval 1s`, `500ms`, `2.5s`,
//! `1m`): a number and a unit, checked against the caller's bounds with a message that says
//! which bound was crossed.

/// Why a duration was refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum DurationError {
    /// No unit, or an unknown one.
    #[error("{flag} {text:?}: expected a number with a unit: ms, s, m or h (e.g. 1s, 500ms)")]
    NoUnit {
        /// The option it was given to.
        flag: String,
        /// What was given.
        text: String,
    },
    /// The number part does not parse.
    #[error("{flag} {text:?}: {number:?} is not a number")]
    NotANumber {
        /// The option it was given to.
        flag: String,
        /// What was given.
        text: String,
        /// The number part.
        number: String,
    },
    /// Below the minimum.
    #[error("{flag} {text:?}: must be at least {min}")]
    TooSmall {
        /// The option it was given to.
        flag: String,
        /// What was given.
        text: String,
        /// The minimum, as a duration.
        min: String,
    },
    /// Above the maximum (or not finite).
    #[error("{flag} {text:?}: too large (at most {max})")]
    TooLarge {
        /// The option it was given to.
        flag: String,
        /// What was given.
        text: String,
        /// The maximum, as a duration.
        max: String,
    },
}

/// A nanosecond count as a short duration (`10ms`, `1.5s`, `1h`).
pub fn format_ns(ns: u64) -> String {
    const MS: u64 = 1_000_000;
    const S: u64 = 1_000_000_000;
    if ns >= 3600 * S && ns % (3600 * S) == 0 {
        format!("{}h", ns / (3600 * S))
    } else if ns >= S {
        format!("{}s", ns as f64 / S as f64)
    } else if ns >= MS {
        format!("{}ms", ns as f64 / MS as f64)
    } else {
        format!("{ns}ns")
    }
}

/// Parse `250ms`, `1s`, `2.5s`, `1m`, `1h` into nanoseconds within `[min_ns, max_ns]`. `flag` names
/// the option in messages. Total: any text gives a value or a [`DurationError`].
pub fn parse_duration_ns(
    flag: &str,
    text: &str,
    min_ns: u64,
    max_ns: u64,
) -> Result<u64, DurationError> {
    let s = text.trim();
    let (num, mult) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1e6)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1e9)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60e9)
    } else if let Some(n) = s.strip_suffix('h') {
        (n, 3600e9)
    } else {
        return Err(DurationError::NoUnit {
            flag: flag.into(),
            text: text.into(),
        });
    };
    let v: f64 = num.trim().parse().map_err(|_| DurationError::NotANumber {
        flag: flag.into(),
        text: text.into(),
        number: num.into(),
    })?;
    if v.is_nan() {
        return Err(DurationError::NotANumber {
            flag: flag.into(),
            text: text.into(),
            number: num.into(),
        });
    }
    let ns = v * mult;
    if ns > max_ns as f64 {
        return Err(DurationError::TooLarge {
            flag: flag.into(),
            text: text.into(),
            max: format_ns(max_ns),
        });
    }
    if ns < min_ns as f64 {
        return Err(DurationError::TooSmall {
            flag: flag.into(),
            text: text.into(),
            min: format_ns(min_ns),
        });
    }
    // `max_ns as f64` may round up: never return more than the bound.
    Ok((ns as u64).min(max_ns))
}

/// The agent's and `top`'s interval: at least 10 ms, at most one hour.
pub fn parse_interval_ns(text: &str) -> Result<u64, DurationError> {
    parse_duration_ns("--interval", text, 10_000_000, 3_600_000_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals() {
        assert_eq!(parse_interval_ns("1s"), Ok(1_000_000_000));
        assert_eq!(parse_interval_ns("250ms"), Ok(250_000_000));
        assert_eq!(parse_interval_ns("1.5s"), Ok(1_500_000_000));
        assert_eq!(parse_interval_ns("2m"), Ok(120_000_000_000));
        assert_eq!(parse_interval_ns("1h"), Ok(3_600_000_000_000));
        assert!(matches!(
            parse_interval_ns("5"),
            Err(DurationError::NoUnit { .. })
        ));
        assert!(matches!(
            parse_interval_ns("xs"),
            Err(DurationError::NotANumber { .. })
        ));
        let e = parse_interval_ns("1ms").expect_err("small");
        assert_eq!(e.to_string(), "--interval \"1ms\": must be at least 10ms");
    }

    #[test]
    fn huge_values_say_too_large() {
        for s in ["1e300s", "inf s", "infs", "2h", "61m", "1e20ms"] {
            let e = parse_interval_ns(s);
            assert!(
                matches!(e, Err(DurationError::TooLarge { .. })) || s == "inf s",
                "{s}: {e:?}"
            );
        }
        let e = parse_interval_ns("1e300s").expect_err("large").to_string();
        assert!(e.contains("too large") && e.contains("1h"), "{e}");
        assert!(matches!(
            parse_interval_ns("-infs"),
            Err(DurationError::TooSmall { .. })
        ));
        assert!(matches!(
            parse_interval_ns("NaNs"),
            Err(DurationError::NotANumber { .. })
        ));
    }
}
