//! The largest numbers a scenario file or an agent profile may give. Both are files from
//! others, and every duration in them becomes a `Duration` (which panics past `u64::MAX`
//! seconds: `deadline = 1e300` did) or milliseconds in a `u64`, so each is checked here first
//! and refused with an error naming the file, line and field.

/// Longest duration in seconds (budgets, intervals, timeouts, deadlines): one day.
pub const MAX_SECONDS: f64 = 86_400.0;
/// Highest request rate a profile may declare (`reactions.max_rate`, requests per second).
pub const MAX_RATE: f64 = 10_000.0;
/// Longest generated text (`{ text = ..., repeat = ..., times = N }`), in bytes.
pub const MAX_GENERATED_TEXT: usize = 1 << 20;

/// `x` when it is finite, above zero and at most `max`; otherwise what is expected.
pub fn positive_at_most(x: f64, max: f64, unit: &str) -> Result<f64, String> {
    if x.is_finite() && x > 0.0 && x <= max {
        Ok(x)
    } else {
        // `1e300` as written, not its 301 digits.
        let got = if x.abs() >= 1e9 {
            format!("{x:e}")
        } else {
            x.to_string()
        };
        Err(format!(
            "expected a positive number of {unit} up to {max}, got {got}"
        ))
    }
}

/// [`positive_at_most`] for seconds, up to [`MAX_SECONDS`].
pub fn positive_seconds(x: f64) -> Result<f64, String> {
    positive_at_most(x, MAX_SECONDS, "seconds")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_finite_positive_and_at_most_a_day() {
        assert_eq!(positive_seconds(2.5), Ok(2.5));
        assert_eq!(positive_seconds(MAX_SECONDS), Ok(MAX_SECONDS));
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e300, MAX_SECONDS + 1.0] {
            assert!(positive_seconds(bad).is_err(), "{bad}");
        }
    }
}
