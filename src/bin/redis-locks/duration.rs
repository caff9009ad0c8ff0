//! Durations on the command line (`500ms`, `10s`, `5m`, `1h`) and for people to read.

use std::time::Duration;

use redis_locks::MAX_DURATION;

/// What every duration error says about the accepted forms.
const FORMS: &str = "expected a whole number followed by a unit: ms, s, m or h \
                     (for example 500ms, 10s, 5m, 1h)";

/// Parses `<digits><unit>` with unit `ms`, `s`, `m` or `h`. Zero is accepted (callers that
/// need a positive duration use [`parse_positive`]). Anything else, including a bare
/// number, a sign, a fraction, spaces or an upper-case unit, is rejected with a message
/// naming the accepted forms. At most [`MAX_DURATION`] (100 years).
pub fn parse(input: &str) -> Result<Duration, String> {
    let split = input
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(input.len());
    let (digits, unit) = input.split_at(split);
    if digits.is_empty() || unit.is_empty() {
        return Err(format!("invalid duration {input:?}: {FORMS}"));
    }
    let millis_per_unit: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return Err(format!("invalid duration {input:?}: {FORMS}")),
    };
    let too_long = || format!("duration {input:?} is too long: at most 100 years");
    let millis = digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(millis_per_unit))
        .ok_or_else(too_long)?;
    let duration = Duration::from_millis(millis);
    if duration > MAX_DURATION {
        return Err(too_long());
    }
    Ok(duration)
}

/// As [`parse`], but zero is rejected.
pub fn parse_positive(input: &str) -> Result<Duration, String> {
    let duration = parse(input)?;
    if duration.is_zero() {
        return Err(format!("duration {input:?} must be greater than zero"));
    }
    Ok(duration)
}

/// A short human form: `750ms`, `4.2s`, `3m05s`, `2h07m`.
pub fn human(duration: Duration) -> String {
    let ms = duration.as_millis();
    if ms < 1_000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{}.{}s", ms / 1_000, (ms % 1_000) / 100)
    } else if ms < 3_600_000 {
        let secs = ms / 1_000;
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else {
        let mins = ms / 60_000;
        format!("{}h{:02}m", mins / 60, mins % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_each_unit() {
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
        assert_eq!(parse("007s"), Ok(Duration::from_secs(7)));
    }

    #[test]
    fn rejects_everything_else_naming_the_forms() {
        for bad in [
            "", "10", "abc", "s", "ms", "-5s", "+5s", "1.5s", "5 s", " 5s", "5s ", "5S", "5sec",
            "5d", "1h30m", "5mss", "٣s",
        ] {
            let err = parse(bad).expect_err(bad);
            assert!(err.contains("500ms, 10s, 5m, 1h"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn rejects_overflow_and_more_than_a_century() {
        assert!(
            parse("99999999999999999999999s")
                .unwrap_err()
                .contains("too long")
        );
        assert!(
            parse("18446744073709551615h")
                .unwrap_err()
                .contains("too long")
        );
        assert!(parse("876001h").unwrap_err().contains("too long"));
        assert!(parse("876000h").is_ok());
    }

    #[test]
    fn positive_rejects_zero() {
        assert!(
            parse_positive("0ms")
                .unwrap_err()
                .contains("greater than zero")
        );
        assert_eq!(parse_positive("1ms"), Ok(Duration::from_millis(1)));
        assert!(parse_positive("10").is_err());
    }

    #[test]
    fn human_forms() {
        assert_eq!(human(Duration::from_millis(750)), "750ms");
        assert_eq!(human(Duration::from_millis(4_250)), "4.2s");
        assert_eq!(human(Duration::from_secs(185)), "3m05s");
        assert_eq!(human(Duration::from_secs(2 * 3600 + 7 * 60 + 59)), "2h07m");
    }
}
