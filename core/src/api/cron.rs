//! Cron schedules of disruption budgets.
//!
//! upstream: budgets parse `spec.disruption.budgets[].schedule` with `robfig/cron/v3`'s standard parser
//! (`cron.ParseStandard`, evaluated in UTC): five whitespace-separated fields (minute, hour, day of month, month,
//! day of week) or one of the descriptors `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight`,
//! `@hourly`. Each field is a comma-separated list of `*`, `?`, `N`, `N-M`, each optionally followed by `/step`;
//! months and weekdays also accept three-letter English names (`jan`, `mon`, case-insensitive). Weekdays are 0–6
//! (Sunday is 0; 7 is rejected, as robfig does).
//!
//! This module parses and matches; finding the next hit after a time belongs to the budget evaluator.

use std::fmt;

/// Why a schedule does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid cron schedule {schedule:?}: {reason}")]
pub struct CronError {
    pub schedule: String,
    pub reason: CronReason,
}

/// What is wrong with a schedule (robfig/cron's messages, which upstream reports).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CronReason {
    #[error("empty spec string")]
    EmptySpec,
    #[error("@every is not supported in budget schedules")]
    EveryUnsupported,
    #[error("unrecognized descriptor {0:?}")]
    UnrecognizedDescriptor(String),
    #[error("expected exactly 5 fields (minute hour day-of-month month day-of-week), found {0}")]
    FieldCount(usize),
    #[error("too many slashes in {field} field {part:?}")]
    TooManySlashes { field: &'static str, part: String },
    #[error("too many hyphens in {field} field {part:?}")]
    TooManyHyphens { field: &'static str, part: String },
    #[error("{number} in {field} field")]
    BadValue { field: &'static str, number: NumberError },
    #[error("{number} in the step of {field} field {part:?}")]
    BadStep { field: &'static str, part: String, number: NumberError },
    #[error("beginning of range ({start}) below minimum ({min}) in {field} field {part:?}")]
    BelowMinimum { field: &'static str, part: String, start: u32, min: u32 },
    #[error("end of range ({end}) above maximum ({max}) in {field} field {part:?}")]
    AboveMaximum { field: &'static str, part: String, end: u32, max: u32 },
    #[error("beginning of range ({start}) beyond end of range ({end}) in {field} field {part:?}")]
    StartBeyondEnd { field: &'static str, part: String, start: u32, end: u32 },
    #[error("step of range should be a positive number in {field} field {part:?}")]
    ZeroStep { field: &'static str, part: String },
}

/// Why a number in a field does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NumberError {
    #[error("empty value")]
    Empty,
    #[error("negative number ({0}) not allowed")]
    Negative(String),
    #[error("failed to parse int from {0:?}")]
    NotAnInt(String),
}

/// A parsed schedule: one bit per allowed value of each field.
#[derive(Clone, PartialEq, Eq)]
pub struct CronSchedule {
    /// Bits 0..=59.
    pub minutes: u64,
    /// Bits 0..=23.
    pub hours: u64,
    /// Bits 1..=31.
    pub days_of_month: u64,
    /// Bits 1..=12.
    pub months: u64,
    /// Bits 0..=6, Sunday = 0.
    pub days_of_week: u64,
    /// The day-of-month field was `*` or `?` (without a step > 1).
    pub day_of_month_star: bool,
    /// The day-of-week field was `*` or `?` (without a step > 1).
    pub day_of_week_star: bool,
}

impl fmt::Debug for CronSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CronSchedule")
            .field("minutes", &format_args!("{:#x}", self.minutes))
            .field("hours", &format_args!("{:#x}", self.hours))
            .field("days_of_month", &format_args!("{:#x}", self.days_of_month))
            .field("months", &format_args!("{:#x}", self.months))
            .field("days_of_week", &format_args!("{:#x}", self.days_of_week))
            .field("day_of_month_star", &self.day_of_month_star)
            .field("day_of_week_star", &self.day_of_week_star)
            .finish()
    }
}

struct Bounds {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

const MINUTE: Bounds = Bounds { name: "minute", min: 0, max: 59, names: &[] };
const HOUR: Bounds = Bounds { name: "hour", min: 0, max: 23, names: &[] };
const DAY_OF_MONTH: Bounds = Bounds { name: "day of month", min: 1, max: 31, names: &[] };
const MONTH: Bounds = Bounds {
    name: "month",
    min: 1,
    max: 12,
    names: &["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"],
};
const DAY_OF_WEEK: Bounds =
    Bounds { name: "day of week", min: 0, max: 6, names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"] };

impl CronSchedule {
    /// Parses a schedule as `cron.ParseStandard` does.
    pub fn parse(schedule: &str) -> Result<CronSchedule, CronError> {
        let err = |reason: CronReason| CronError { schedule: schedule.to_string(), reason };
        let trimmed = schedule.trim();
        if trimmed.is_empty() {
            return Err(err(CronReason::EmptySpec));
        }
        if trimmed.starts_with('@') {
            let expansion = match trimmed {
                "@yearly" | "@annually" => "0 0 1 1 *",
                "@monthly" => "0 0 1 * *",
                "@weekly" => "0 0 * * 0",
                "@daily" | "@midnight" => "0 0 * * *",
                "@hourly" => "0 * * * *",
                other if other.starts_with("@every") => return Err(err(CronReason::EveryUnsupported)),
                other => return Err(err(CronReason::UnrecognizedDescriptor(other.to_string()))),
            };
            return CronSchedule::parse(expansion);
        }
        let fields: Vec<&str> = trimmed.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(err(CronReason::FieldCount(fields.len())));
        }
        let (minutes, _) = parse_field(fields[0], &MINUTE).map_err(err)?;
        let (hours, _) = parse_field(fields[1], &HOUR).map_err(err)?;
        let (days_of_month, day_of_month_star) = parse_field(fields[2], &DAY_OF_MONTH).map_err(err)?;
        let (months, _) = parse_field(fields[3], &MONTH).map_err(err)?;
        let (days_of_week, day_of_week_star) = parse_field(fields[4], &DAY_OF_WEEK).map_err(err)?;
        Ok(CronSchedule { minutes, hours, days_of_month, months, days_of_week, day_of_month_star, day_of_week_star })
    }

    /// True if the schedule fires at this (UTC) minute. Day matching follows robfig: when either day field is a
    /// star both must match, otherwise either may.
    pub fn matches(&self, minute: u32, hour: u32, day_of_month: u32, month: u32, day_of_week: u32) -> bool {
        let bit = |set: u64, v: u32| v < 64 && set & (1u64 << v) != 0;
        let dom = bit(self.days_of_month, day_of_month);
        let dow = bit(self.days_of_week, day_of_week);
        let day = if self.day_of_month_star || self.day_of_week_star { dom && dow } else { dom || dow };
        bit(self.minutes, minute) && bit(self.hours, hour) && bit(self.months, month) && day
    }
}

/// One field: returns the bit set and whether it was a plain star.
fn parse_field(field: &str, bounds: &Bounds) -> Result<(u64, bool), CronReason> {
    let mut bits = 0u64;
    let mut star = false;
    for part in field.split(',') {
        let (range_bits, part_star) = parse_range(part, bounds)?;
        bits |= range_bits;
        star |= part_star;
    }
    Ok((bits, star))
}

fn parse_range(text: &str, bounds: &Bounds) -> Result<(u64, bool), CronReason> {
    let field = bounds.name;
    let part = || text.to_string();
    let mut range_and_step = text.split('/');
    let range = range_and_step.next().unwrap_or("");
    let step_text = range_and_step.next();
    if range_and_step.next().is_some() {
        return Err(CronReason::TooManySlashes { field, part: part() });
    }
    let mut low_and_high = range.split('-');
    let low = low_and_high.next().unwrap_or("");
    let high = low_and_high.next();
    if low_and_high.next().is_some() {
        return Err(CronReason::TooManyHyphens { field, part: part() });
    }
    let (start, mut end, mut star) = if low == "*" || low == "?" {
        // robfig ignores anything after `*-`.
        (bounds.min, bounds.max, true)
    } else {
        let start = parse_value(low, bounds)?;
        let end = match high {
            Some(h) => parse_value(h, bounds)?,
            None => start,
        };
        (start, end, false)
    };
    let step = match step_text {
        None => 1,
        Some(text) => {
            let step = parse_number(text).map_err(|number| CronReason::BadStep { field, part: part(), number })?;
            // `N/step` means from N to the maximum.
            if high.is_none() && !star {
                end = bounds.max;
            }
            if step > 1 {
                star = false;
            }
            step
        }
    };
    if start < bounds.min {
        return Err(CronReason::BelowMinimum { field, part: part(), start, min: bounds.min });
    }
    if end > bounds.max {
        return Err(CronReason::AboveMaximum { field, part: part(), end, max: bounds.max });
    }
    if start > end {
        return Err(CronReason::StartBeyondEnd { field, part: part(), start, end });
    }
    if step == 0 {
        return Err(CronReason::ZeroStep { field, part: part() });
    }
    let mut bits = 0u64;
    let mut v = start;
    while v <= end {
        bits |= 1u64 << v;
        v += step;
    }
    Ok((bits, star))
}

fn parse_value(text: &str, bounds: &Bounds) -> Result<u32, CronReason> {
    let lower = text.to_ascii_lowercase();
    if let Some(index) = bounds.names.iter().position(|n| *n == lower) {
        // Month names start at 1, weekday names at 0.
        return Ok(index as u32 + bounds.min);
    }
    parse_number(text).map_err(|number| CronReason::BadValue { field: bounds.name, number })
}

fn parse_number(text: &str) -> Result<u32, NumberError> {
    if text.is_empty() {
        return Err(NumberError::Empty);
    }
    if let Some(rest) = text.strip_prefix('-') {
        if !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()) {
            return Err(NumberError::Negative(text.to_string()));
        }
    }
    if !text.bytes().all(|b| b.is_ascii_digit()) || text.len() > 9 {
        return Err(NumberError::NotAnInt(text.to_string()));
    }
    text.parse::<u32>().map_err(|_| NumberError::NotAnInt(text.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_standard_schedules_and_descriptors() {
        for ok in [
            "* * * * *",
            "0 9 * * mon-fri",
            "*/15 0-6 1,15 JAN-mar ?",
            "30 2 * * 0",
            "5/10 * * * *",
            "0 0 31 12 6",
            "@daily",
            "@midnight",
            "@hourly",
            "@weekly",
            "@monthly",
            "@yearly",
            "@annually",
        ] {
            assert!(CronSchedule::parse(ok).is_ok(), "{ok}: {:?}", CronSchedule::parse(ok));
        }
        for bad in [
            "",
            "* * * *",
            "* * * * * *",
            "60 * * * *",
            "* 24 * * *",
            "* * 0 * *",
            "* * * 13 *",
            "* * * * 7",
            "5-1 * * * *",
            "*/0 * * * *",
            "1-2-3 * * * *",
            "1/2/3 * * * *",
            "a * * * *",
            "-1 * * * *",
            "1,,2 * * * *",
            "* * * * funday",
            "@every 5m",
            "@fortnightly",
        ] {
            assert!(CronSchedule::parse(bad).is_err(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn matches_fields_and_day_semantics() {
        let weekdays_at_nine = CronSchedule::parse("0 9 * * mon-fri").unwrap();
        assert!(weekdays_at_nine.matches(0, 9, 3, 6, 1));
        assert!(!weekdays_at_nine.matches(0, 9, 3, 6, 0));
        assert!(!weekdays_at_nine.matches(1, 9, 3, 6, 1));
        // Both day fields restricted: either may match.
        let either = CronSchedule::parse("0 0 1 * 1").unwrap();
        assert!(either.matches(0, 0, 1, 5, 3));
        assert!(either.matches(0, 0, 9, 5, 1));
        assert!(!either.matches(0, 0, 9, 5, 3));
        let steps = CronSchedule::parse("5/20 * * * *").unwrap();
        assert_eq!(steps.minutes, (1 << 5) | (1 << 25) | (1 << 45));
        assert_eq!(CronSchedule::parse("@daily").unwrap(), CronSchedule::parse("0 0 * * *").unwrap());
    }
}
