//! `install-service --on-calendar`: checked before anything is written, by `systemd-analyze
//! calendar` where it exists (the parser the timer will use), else by [`check_grammar`], a subset
//! of systemd.time(7)'s calendar events good enough to refuse what is not a time.

use std::path::PathBuf;

use crate::{bail, ensure};

/// The shorthands systemd accepts (case-insensitive).
const SHORTHANDS: [&str; 10] = [
    "minutely",
    "hourly",
    "daily",
    "weekly",
    "monthly",
    "yearly",
    "annually",
    "quarterly",
    "semiannually",
    "semi-annually",
];

const WEEKDAYS: [&str; 7] = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"];

/// Checks `spec` as an `OnCalendar=` value; the error says what is wrong and shows valid forms.
pub fn check(spec: &str) -> crate::Result<()> {
    let examples = "e.g. `daily`, `*-*-* 02:00:00`, `Mon..Fri 03:00`, `hourly` (systemd.time(7))";
    ensure!(
        !spec.trim().is_empty() && !spec.contains(['\n', '\r']),
        "--on-calendar {spec:?}: one line holding a calendar event, {examples}; nothing was written"
    );
    match systemd_analyze() {
        Some(tool) => match std::process::Command::new(&tool).args(["calendar", spec]).output() {
            Ok(out) if out.status.success() => Ok(()),
            Ok(out) => {
                let said = String::from_utf8_lossy(&out.stderr);
                bail!(
                    "--on-calendar {spec:?}: not a calendar event ({} says: {}); {examples}; nothing was written",
                    tool.display(),
                    said.lines().next().unwrap_or("").trim()
                )
            }
            // Present but not runnable: the grammar below still refuses what is not a time.
            Err(_) => grammar_error(spec, examples),
        },
        None => grammar_error(spec, examples),
    }
}

fn grammar_error(spec: &str, examples: &str) -> crate::Result<()> {
    check_grammar(spec).map_err(|why| {
        crate::Error::refused(format!(
            "--on-calendar {spec:?}: not a calendar event ({why}); {examples}; nothing was written"
        ))
    })
}

/// `systemd-analyze` on PATH, if any.
fn systemd_analyze() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join("systemd-analyze")).find(|candidate| {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::metadata(candidate).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// `[WEEKDAYS] [[YEAR-]MONTH-DAY] [HOUR:MINUTE[:SECOND]] [TIMEZONE]`, a shorthand (`daily`, …)
/// with an optional time zone, or `@EPOCH`. Each number may be `*`, a list (`1,15`), a range
/// (`1..5`) and have a repetition (`0/15`).
pub fn check_grammar(spec: &str) -> Result<(), String> {
    let words: Vec<&str> = spec.split_whitespace().collect();
    let Some((&first, mut rest)) = words.split_first() else { return Err("empty".into()) };
    if let Some(epoch) = first.strip_prefix('@') {
        return match (epoch.parse::<u64>(), rest.is_empty()) {
            (Ok(_), true) => Ok(()),
            _ => Err(format!("`{spec}`: `@` takes seconds since 1970 and nothing else")),
        };
    }
    if SHORTHANDS.contains(&first.to_lowercase().as_str()) {
        return time_zone(rest);
    }
    rest = &words[..];
    let mut parts = 0;
    if let Some(&word) = rest.first()
        && word.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && !word.contains('/')
        && weekdays(word).is_ok()
    {
        (rest, parts) = (&rest[1..], parts + 1);
    }
    if let Some(&word) = rest.first()
        && !word.contains(':')
        && (word.contains('-') || word.contains('~'))
        && word.starts_with(|c: char| c.is_ascii_digit() || c == '*')
    {
        date(word)?;
        (rest, parts) = (&rest[1..], parts + 1);
    }
    if let Some(&word) = rest.first()
        && word.contains(':')
    {
        time(word)?;
        (rest, parts) = (&rest[1..], parts + 1);
    }
    if parts == 0 {
        return Err(format!(
            "`{first}` is no weekday, date (`*-*-*`), time (`02:00`) or shorthand (`daily`)"
        ));
    }
    time_zone(rest)
}

/// What may follow: nothing, or one time zone (`UTC`, `Europe/Berlin`).
fn time_zone(rest: &[&str]) -> Result<(), String> {
    match rest {
        [] => Ok(()),
        [zone]
            if zone.starts_with(|c: char| c.is_ascii_alphabetic())
                && zone.chars().all(|c| c.is_ascii_alphanumeric() || "/_+-".contains(c)) =>
        {
            Ok(())
        }
        [word, ..] => Err(format!("`{word}` is not in its place (weekdays, date, time, then a time zone)")),
    }
}

fn weekdays(word: &str) -> Result<(), String> {
    let day = |name: &str| {
        let lower = name.to_lowercase();
        let known =
            WEEKDAYS.iter().any(|full| lower == *full || (lower.len() == 3 && full.starts_with(&lower)));
        if known { Ok(()) } else { Err(format!("`{name}` is not a weekday")) }
    };
    for item in word.split(',') {
        match item.split_once("..") {
            Some((from, to)) => {
                day(from)?;
                day(to)?;
            }
            None => day(item)?,
        }
    }
    Ok(())
}

fn date(word: &str) -> Result<(), String> {
    // `~` counts the day from the end of the month.
    let (front, day) =
        word.rsplit_once(['-', '~']).ok_or_else(|| format!("`{word}`: a date is [YEAR-]MONTH-DAY"))?;
    let fields: Vec<&str> = front.split('-').collect();
    let (year, month) = match fields.as_slice() {
        [month] => (None, *month),
        [year, month] => (Some(*year), *month),
        _ => return Err(format!("`{word}`: a date is [YEAR-]MONTH-DAY")),
    };
    if let Some(year) = year {
        component(year, 1970, 2199, "year")?;
    }
    component(month, 1, 12, "month")?;
    component(day, 1, 31, "day")
}

fn time(word: &str) -> Result<(), String> {
    let fields: Vec<&str> = word.split(':').collect();
    let (hour, minute, second) = match fields.as_slice() {
        [h, m] => (*h, *m, None),
        [h, m, s] => (*h, *m, Some(*s)),
        _ => return Err(format!("`{word}`: a time is HOUR:MINUTE[:SECOND]")),
    };
    component(hour, 0, 23, "hour")?;
    component(minute, 0, 59, "minute")?;
    if let Some(second) = second {
        // Seconds may have a fraction: `00.5`.
        let whole = second.split_once('.').map_or(second, |(whole, fraction)| {
            if fraction.chars().all(|c| c.is_ascii_digit()) { whole } else { "x" }
        });
        component(whole, 0, 59, "second")?;
    }
    Ok(())
}

/// `*`, or a list of values and ranges (`a..b`) within `low..=high`, each with an optional `/step`.
fn component(text: &str, low: u32, high: u32, what: &str) -> Result<(), String> {
    let bad =
        || format!("`{text}` is not a {what} ({low}..{high}, `*`, lists `a,b`, ranges `a..b`, steps `/n`)");
    let value = |t: &str| t.parse::<u32>().ok().filter(|v| (low..=high).contains(v));
    for item in text.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((range, step)) => (range, Some(step)),
            None => (item, None),
        };
        if step.is_some_and(|s| s.parse::<u32>().map_or(true, |s| s == 0)) {
            return Err(bad());
        }
        let ok = match range.split_once("..") {
            _ if range == "*" => true,
            Some((from, to)) => value(from).zip(value(to)).is_some_and(|(a, b)| a <= b),
            None => value(range).is_some(),
        };
        if !ok {
            return Err(bad());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_grammar;

    #[test]
    fn the_usual_forms_pass_and_what_is_not_a_time_is_refused() {
        for good in [
            "daily",
            "Hourly",
            "weekly UTC",
            "semi-annually",
            "*-*-* 02:00:00",
            "Mon..Fri 03:00",
            "Sat,Sun *-*-1..7 4:00",
            "*:0/15",
            "2026-12-24",
            "Mon",
            "monday 3:00",
            "03:00 Europe/Berlin",
            "12:00:00.5",
            "*-02~03",
            "1-1",
            "@1700000000",
            "Mon..Fri *-*-* 03:00:00 UTC",
        ] {
            assert_eq!(check_grammar(good), Ok(()), "{good}");
        }
        for bad in [
            "not a time",
            "",
            "25:00",
            "*-*-* 02:00:60",
            "*-13-01",
            "tomorrow",
            "Mon..Funday 03:00",
            "03:00 UTC extra",
            "daily at 3",
            "02:00:00:00",
            "*:0/0",
            "@soon",
        ] {
            assert!(check_grammar(bad).is_err(), "{bad:?} passed");
        }
    }
}
