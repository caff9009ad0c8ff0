//! Durations on the command line (`500ms`, `10s`, `1.5s`, `5m`, `1h`) and for people to
//! read.

use std::time::Duration;

use redis_locks::MAX_DURATION;

/// What every duration error says about the accepted forms.
const FORMS: &str = "expected numbers with units h, m, s or ms, largest first \
                     (for example 500ms, 10s, 1.5s, 5m, 1h, 1m30s, 2h15m)";

/// Parses one or more `<digits>[.<digits>]<unit>` parts with units `h`, `m`, `s`, `ms`,
/// each unit at most once and largest first (`1h30m`, `1m30s`, `2s500ms`, `1.5s`,
/// `0.25h`). A fraction of a millisecond rounds up (`1.5ms` is 2 ms: a lease or a wait is
/// never cut short). Zero is accepted (callers that need a positive duration use
/// [`parse_positive`]). Anything else, including a bare number, a sign, a fraction without
/// digits on both sides, spaces, an upper-case unit or units out of order, is rejected
/// with a message naming the accepted forms. At most [`MAX_DURATION`] (100 years).
///
/// Hand-written rather than `humantime`: that crate also accepts days, months, years,
/// spaces and spelled-out units, which the CLI would then have to document and show back.
pub fn parse(input: &str) -> Result<Duration, String> {
    let invalid = || {
        if input.starts_with('-') {
            format!("invalid duration {input:?}: a duration cannot be negative; {FORMS}")
        } else {
            format!("invalid duration {input:?}: {FORMS}")
        }
    };
    let too_long = || format!("duration {input:?} is too long: at most 100 years");
    let mut rest = input;
    let mut total: u64 = 0;
    // The unit of the previous part, as ms per unit: each next one must be smaller.
    let mut previous_unit = u64::MAX;
    if rest.is_empty() {
        return Err(invalid());
    }
    while !rest.is_empty() {
        let split = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(split);
        let unit_len = after
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let (digits, fraction) = number.split_once('.').unwrap_or((number, ""));
        let bad_fraction = number.contains('.')
            && (fraction.is_empty() || fraction.len() > 9 || fraction.contains('.'));
        if digits.is_empty() || unit.is_empty() || bad_fraction {
            return Err(invalid());
        }
        let millis_per_unit: u64 = match unit {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            _ => return Err(invalid()),
        };
        if millis_per_unit >= previous_unit {
            return Err(invalid());
        }
        previous_unit = millis_per_unit;
        let whole = digits
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(millis_per_unit))
            .ok_or_else(too_long)?;
        // The fraction's share of the unit, in whole ms rounded up (at most 9 digits, so
        // the product fits: below 10^9 * 3.6 * 10^6).
        let fraction_ms = if fraction.is_empty() {
            0
        } else {
            let scale = 10u64.pow(fraction.len() as u32);
            let numerator = fraction.parse::<u64>().map_err(|_| invalid())?;
            (numerator * millis_per_unit).div_ceil(scale)
        };
        let part = whole.checked_add(fraction_ms).ok_or_else(too_long)?;
        total = total.checked_add(part).ok_or_else(too_long)?;
        rest = next;
    }
    let duration = Duration::from_millis(total);
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
            "",
            "10",
            "abc",
            "s",
            "ms",
            "-5s",
            "+5s",
            ".5s",
            "1.s",
            "1..5s",
            "1.5.5s",
            "5 s",
            " 5s",
            "5s ",
            "5S",
            "5sec",
            "5d",
            "5mss",
            "٣s",
            "30s1m",
            "1m1m",
            "1m30",
            "1h 30m",
            "1.0000000001s",
        ] {
            let err = parse(bad).expect_err(bad);
            assert!(
                err.contains("500ms, 10s, 1.5s, 5m, 1h, 1m30s"),
                "{bad:?}: {err}"
            );
        }
        assert!(parse("-5s").unwrap_err().contains("cannot be negative"));
    }

    #[test]
    fn accepts_decimals_rounding_up_to_whole_milliseconds() {
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1_500)));
        assert_eq!(parse("0.25h"), Ok(Duration::from_secs(900)));
        assert_eq!(parse("0.1s"), Ok(Duration::from_millis(100)));
        assert_eq!(parse("1.5ms"), Ok(Duration::from_millis(2)));
        assert_eq!(parse("0.0001s"), Ok(Duration::from_millis(1)));
        assert_eq!(parse("1m0.5s"), Ok(Duration::from_millis(60_500)));
        assert_eq!(parse("0.0s"), Ok(Duration::ZERO));
        assert!(parse_positive("0.0s").is_err());
    }

    #[test]
    fn accepts_compound_forms_largest_first() {
        assert_eq!(parse("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("2s500ms"), Ok(Duration::from_millis(2500)));
        assert_eq!(parse("1h0m5s"), Ok(Duration::from_secs(3605)));
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
