//! Time stamps: RFC 3339 UTC with milliseconds, formatted and parsed by hand.
//!
//! Every time stamp in every file is a string like `2026-05-01T09:30:00.125Z`, so shell
//! scripts can compare them as strings and other programs parse them with any RFC 3339
//! library. The conversions are the civil-calendar algorithms of Howard Hinnant; pulling a
//! date-time crate in for two functions would slow the CLIs' start-up for nothing. This is
//! the workspace's only calendar code (the agent's prompt date uses [`Timestamp::date_utc`]);
//! the parser rejects dates that do not exist and offsets beyond ±23:59, checked
//! exhaustively against the day-count conversion in the tests.

use std::cell::Cell;
use std::fmt;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A point in time, in milliseconds since the Unix epoch (UTC).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Timestamp(i64);

thread_local! {
    /// The store's clock while a change of the PostgreSQL store runs on this thread: the
    /// server's time read with the row lock, and when it was read here.
    static STORE_CLOCK: Cell<Option<(i64, Instant)>> = const { Cell::new(None) };
}

/// While alive, [`Timestamp::now`] on this thread is the store's clock: `server_ms` (the
/// server's time read in the change's first round trip) plus the time elapsed here since.
/// So every time a change writes (claim leases, `dead_at`, message times) comes from the
/// server's clock, whichever host runs the change. Dropping it restores the clock before.
pub(crate) struct StoreClock {
    before: Option<(i64, Instant)>,
}

impl StoreClock {
    pub(crate) fn enter(server_ms: i64) -> StoreClock {
        let before = STORE_CLOCK.with(|clock| clock.replace(Some((server_ms, Instant::now()))));
        StoreClock { before }
    }
}

impl Drop for StoreClock {
    fn drop(&mut self) {
        STORE_CLOCK.with(|clock| clock.set(self.before));
    }
}

impl Timestamp {
    /// The current time: this machine's clock, or, inside a change of the PostgreSQL
    /// store, the server's (see `StoreClock`).
    pub fn now() -> Timestamp {
        if let Some((server_ms, read_at)) = STORE_CLOCK.with(Cell::get) {
            let elapsed = i64::try_from(read_at.elapsed().as_millis()).unwrap_or(i64::MAX);
            return Timestamp(server_ms.saturating_add(elapsed));
        }
        Timestamp::system_now()
    }

    /// This machine's clock, whatever store is in use.
    pub fn system_now() -> Timestamp {
        let ms = match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(since) => i64::try_from(since.as_millis()).unwrap_or(i64::MAX),
            Err(before) => -i64::try_from(before.duration().as_millis()).unwrap_or(i64::MAX),
        };
        Timestamp(ms)
    }

    /// A time stamp from milliseconds since the Unix epoch.
    pub const fn from_unix_ms(ms: i64) -> Timestamp {
        Timestamp(ms)
    }

    /// Milliseconds since the Unix epoch.
    pub const fn unix_ms(self) -> i64 {
        self.0
    }

    /// This time plus `d` (saturating).
    pub fn plus(self, d: Duration) -> Timestamp {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        Timestamp(self.0.saturating_add(ms))
    }

    /// How long after `earlier` this time is (zero if it is not after it).
    pub fn since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(u64::try_from(self.0.saturating_sub(earlier.0)).unwrap_or(0))
    }

    /// The calendar date of this time in UTC, `YYYY-MM-DD`.
    pub fn date_utc(self) -> String {
        let (y, m, d) = civil_from_days(self.0.div_euclid(86_400_000));
        format!("{y:04}-{m:02}-{d:02}")
    }

    /// Parses an RFC 3339 time stamp (`Z` or a numeric offset, optional fraction).
    pub fn parse(s: &str) -> Option<Timestamp> {
        let b = s.as_bytes();
        if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
            return None;
        }
        if b[13] != b':' || b[16] != b':' {
            return None;
        }
        let num = |r: std::ops::Range<usize>| -> Option<i64> {
            let part = s.get(r)?;
            if !part.bytes().all(|c| c.is_ascii_digit()) {
                return None;
            }
            part.parse().ok()
        };
        let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
        let (hour, min, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
        if !(1..=12).contains(&month) || !(1..=days_in_month(year, month)).contains(&day) {
            return None;
        }
        if hour > 23 || min > 59 {
            return None;
        }
        if sec > 60 {
            return None;
        }
        let mut rest = &s[19..];
        let mut millis = 0i64;
        if let Some(frac) = rest.strip_prefix('.') {
            let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return None;
            }
            for (i, c) in frac.bytes().take(3).enumerate().take(digits) {
                millis += i64::from(c - b'0') * [100, 10, 1][i];
            }
            rest = &frac[digits..];
        }
        let offset_min = match rest {
            "Z" | "z" => 0,
            _ => {
                let ob = rest.as_bytes();
                if ob.len() != 6 || ob[3] != b':' || !matches!(ob[0], b'+' | b'-') {
                    return None;
                }
                let digits = |r: std::ops::Range<usize>| -> Option<i64> {
                    let part = rest.get(r)?;
                    if !part.bytes().all(|c| c.is_ascii_digit()) {
                        return None;
                    }
                    part.parse().ok()
                };
                let (h, m) = (digits(1..3)?, digits(4..6)?);
                if h > 23 || m > 59 {
                    return None;
                }
                let sign = if ob[0] == b'-' { -1 } else { 1 };
                sign * (h * 60 + m)
            }
        };
        let days = days_from_civil(year, month, day);
        let secs = days * 86_400 + hour * 3600 + min * 60 + sec - offset_min * 60;
        Some(Timestamp(secs * 1000 + millis))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.rem_euclid(1000);
        let secs = self.0.div_euclid(1000);
        let days = secs.div_euclid(86_400);
        let tod = secs.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        write!(
            f,
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
            tod / 3600,
            tod % 3600 / 60,
            tod % 60
        )
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(deserializer)?;
        Timestamp::parse(&raw)
            .ok_or_else(|| serde::de::Error::custom(format!("invalid RFC 3339 time stamp {raw:?}")))
    }
}

/// The number of days in `month` (1–12) of `year` (proleptic Gregorian).
fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date of a day count since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(Timestamp(0).to_string(), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            Timestamp(951_782_400_123).to_string(),
            "2000-02-29T00:00:00.123Z"
        );
        assert_eq!(
            Timestamp(1_767_225_599_999).to_string(),
            "2025-12-31T23:59:59.999Z"
        );
        assert_eq!(Timestamp(-1).to_string(), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn parse_round_trips_and_accepts_offsets() {
        for ms in [0, 1, 951_782_400_123, 1_767_225_599_999, 4_102_444_800_000] {
            let t = Timestamp(ms);
            assert_eq!(Timestamp::parse(&t.to_string()), Some(t));
        }
        assert_eq!(
            Timestamp::parse("2000-02-29T02:00:00+02:00"),
            Timestamp::parse("2000-02-29T00:00:00Z")
        );
        assert_eq!(
            Timestamp::parse("1970-01-01T00:00:00.5Z"),
            Some(Timestamp(500))
        );
        assert_eq!(
            Timestamp::parse("1970-01-01T00:00:00.123456Z"),
            Some(Timestamp(123))
        );
        for bad in [
            "",
            "yesterday",
            "2000-13-01T00:00:00Z",
            "2000-01-01T00:00:00",
            "2000-01-01T00:00:00.Z",
        ] {
            assert_eq!(Timestamp::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn parse_rejects_days_that_do_not_exist() {
        for bad in [
            "2000-02-30T00:00:00Z",
            "2001-02-29T00:00:00Z",
            "1900-02-29T00:00:00Z",
            "2026-04-31T00:00:00Z",
            "2026-11-31T00:00:00Z",
        ] {
            assert_eq!(Timestamp::parse(bad), None, "{bad}");
        }
        assert!(Timestamp::parse("2000-02-29T00:00:00Z").is_some());
        assert!(Timestamp::parse("2024-02-29T00:00:00Z").is_some());
    }

    #[test]
    fn parse_rejects_offsets_out_of_range() {
        for bad in [
            "2000-01-01T00:00:00+99:99",
            "2000-01-01T00:00:00+24:00",
            "2000-01-01T00:00:00-00:60",
            "2000-01-01T00:00:00++1:00",
            "2000-01-01T00:00:00+0:100",
        ] {
            assert_eq!(Timestamp::parse(bad), None, "{bad}");
        }
        assert_eq!(
            Timestamp::parse("2000-01-01T23:59:00+23:59"),
            Timestamp::parse("2000-01-01T00:00:00Z")
        );
    }

    /// Every (year, month, day) with day 1–31 over four centuries (both kinds of century
    /// leap rule): the parser accepts exactly the dates the day-count conversion maps back
    /// to themselves, and every accepted date formats back to the same text.
    #[test]
    fn parse_accepts_exactly_the_real_dates() {
        for year in 1900..=2300 {
            for month in 1..=12 {
                for day in 1..=31 {
                    let text = format!("{year:04}-{month:02}-{day:02}T12:34:56.789Z");
                    let real =
                        civil_from_days(days_from_civil(year, month, day)) == (year, month, day);
                    let parsed = Timestamp::parse(&text);
                    assert_eq!(parsed.is_some(), real, "{text}");
                    if let Some(t) = parsed {
                        assert_eq!(t.to_string(), text);
                        assert_eq!(t.date_utc(), text[..10]);
                    }
                }
            }
        }
    }

    #[test]
    fn the_store_clock_rules_now_while_it_is_entered_and_nests() {
        let outer = StoreClock::enter(1_000_000);
        let now = Timestamp::now().unix_ms();
        assert!((1_000_000..1_010_000).contains(&now), "{now}");
        {
            let _inner = StoreClock::enter(5_000_000);
            assert!(Timestamp::now().unix_ms() >= 5_000_000);
        }
        assert!(Timestamp::now().unix_ms() < 5_000_000);
        drop(outer);
        assert!(Timestamp::now().unix_ms() > 1_700_000_000_000);
        // Another thread keeps its own clock.
        let _clock = StoreClock::enter(7);
        let other = std::thread::spawn(|| Timestamp::now().unix_ms())
            .join()
            .unwrap();
        assert!(other > 1_700_000_000_000);
    }

    #[test]
    fn date_utc_of_known_instants() {
        assert_eq!(Timestamp(0).date_utc(), "1970-01-01");
        assert_eq!(Timestamp(-1).date_utc(), "1969-12-31");
        assert_eq!(Timestamp(951_782_400_123).date_utc(), "2000-02-29");
    }
}
