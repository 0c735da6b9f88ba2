//! `YYYY-MM-DD HH:MM:SS` (UTC) to seconds since 1970-01-01, without a
//! date library: the civil-date → day-number conversion.

/// Days from 1970-01-01 to the given proleptic Gregorian date
/// (H. Hinnant's `days_from_civil`). `month` is 1..=12.
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400; // [0, 399]
    let m = i64::from(month);
    let mp = if m > 2 { m - 3 } else { m + 9 }; // March = 0
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1; // [0, 365]
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy; // [0, 146096]
    era * 146_097 + doe - 719_468
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

/// Days in `month` (1..=12) of `year`.
pub fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(year) => 29,
        2 => 28,
        _ => 0,
    }
}

/// Parses `YYYY-MM-DD HH:MM:SS` (a `T` may stand for the space) as UTC
/// seconds since the epoch; `None` unless every field is in range.
pub fn parse_timestamp(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() != 19
        || b[4] != b'-'
        || b[7] != b'-'
        || !(b[10] == b' ' || b[10] == b'T')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<u32> {
        let part = s.get(from..to)?;
        if !part.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        part.parse().ok()
    };
    let year = i64::from(num(0, 4)?);
    let month = num(5, 7)?;
    let day = num(8, 10)?;
    let (hour, minute, second) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    if !(1..=12).contains(&month)
        || day == 0
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some(days * 86_400 + i64::from(hour * 3600 + minute * 60 + second))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_days() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(1969, 12, 31), -1);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(2017, 10, 9), 17_448);
        assert_eq!(days_from_civil(2024, 2, 29), 19_782);
    }

    #[test]
    fn known_timestamps() {
        // `date -u -d '2017-10-09 07:01:55' +%s`
        assert_eq!(parse_timestamp("2017-10-09 07:01:55"), Some(1_507_532_515));
        assert_eq!(parse_timestamp("1970-01-01T00:00:00"), Some(0));
        assert_eq!(parse_timestamp("2000-02-29 23:59:59"), Some(951_868_799));
    }

    #[test]
    fn consecutive_days_are_one_apart() {
        let mut prev = days_from_civil(1899, 12, 31);
        for year in 1900..2101 {
            for month in 1..=12 {
                for day in 1..=days_in_month(year, month) {
                    let d = days_from_civil(year, month, day);
                    assert_eq!(d, prev + 1, "{year}-{month}-{day}");
                    prev = d;
                }
            }
        }
    }

    #[test]
    fn rejects_out_of_range_and_malformed() {
        for bad in [
            "2017-13-01 00:00:00",
            "2017-02-29 00:00:00",
            "1900-02-29 00:00:00",
            "2017-04-31 00:00:00",
            "2017-01-00 00:00:00",
            "2017-01-01 24:00:00",
            "2017-01-01 00:60:00",
            "2017-01-01 00:00:60",
            "2017-1-01 00:00:00",
            "2017-01-01 00:00:0x",
            "2017-01-01  0:00:00",
            "+017-01-01 00:00:00",
            "2017-01-01",
            "",
            "2017-01-01 00:00:00Z",
        ] {
            assert_eq!(parse_timestamp(bad), None, "{bad}");
        }
    }
}
