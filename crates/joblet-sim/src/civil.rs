//! `YYYY-MM-DD HH:MM:SS` (UTC; a `T` may stand for the space) to seconds
//! since 1970-01-01, by the `time` crate: the shape is checked here (fixed
//! widths, digits only), the calendar (month lengths, leap years) by
//! `time`.

use time::macros::format_description;
use time::PrimitiveDateTime;

/// Parses `YYYY-MM-DD HH:MM:SS` (a `T` may stand for the space) as UTC
/// seconds since the epoch; `None` unless every field is in range.
pub fn parse_timestamp(s: &str) -> Option<i64> {
    let shape_ok = s.len() == 19
        && s.bytes().enumerate().all(|(i, c)| match i {
            4 | 7 => c == b'-',
            10 => c == b' ' || c == b'T',
            13 | 16 => c == b':',
            _ => c.is_ascii_digit(),
        });
    if !shape_ok {
        return None;
    }
    let mut spaced = s.to_owned();
    spaced.replace_range(10..11, " ");
    let format = format_description!("[year]-[month]-[day] [hour]:[minute]:[second]");
    PrimitiveDateTime::parse(&spaced, format)
        .ok()
        .map(|t| t.assume_utc().unix_timestamp())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The conversion this module used before it used `time` (H.
    /// Hinnant's `days_from_civil`), kept as the reference.
    fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
        let y = if month <= 2 { year - 1 } else { year };
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let m = i64::from(month);
        let mp = if m > 2 { m - 3 } else { m + 9 };
        let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        era * 146_097 + doe - 719_468
    }

    fn days_in_month(year: i64, month: u32) -> u32 {
        let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
        match month {
            1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
            4 | 6 | 9 | 11 => 30,
            2 if leap => 29,
            _ => 28,
        }
    }

    #[test]
    fn known_timestamps() {
        // `date -u -d '2017-10-09 07:01:55' +%s`
        assert_eq!(parse_timestamp("2017-10-09 07:01:55"), Some(1_507_532_515));
        assert_eq!(parse_timestamp("1970-01-01T00:00:00"), Some(0));
        assert_eq!(parse_timestamp("2000-02-29 23:59:59"), Some(951_868_799));
        assert_eq!(parse_timestamp("1969-12-31 23:59:59"), Some(-1));
    }

    #[test]
    fn every_day_1900_to_2100_as_the_old_conversion_gave() {
        for year in 1900..2101 {
            for month in 1..=12 {
                for day in 1..=days_in_month(year, month) {
                    let s = format!("{year:04}-{month:02}-{day:02} 13:07:59");
                    let want = days_from_civil(year, month, day) * 86_400 + 13 * 3600 + 7 * 60 + 59;
                    assert_eq!(parse_timestamp(&s), Some(want), "{s}");
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
            "2017-01-01X00:00:00",
        ] {
            assert_eq!(parse_timestamp(bad), None, "{bad}");
        }
    }
}
