//! The headless subcommands. Each builds scenes and steps lanes through the same
//! [`crate::physics::world::LaneWorld`] the sandbox runs.

pub mod bench;
pub mod demo;
pub mod export;
pub mod rod;
pub mod run;
pub mod stdout;
pub mod throw;

/// A count on the command line (`--steps`, `--n`, `--repeat`, `--from`): digits, or a whole number written another way
/// (`1e3`, `1000.0`), with spaces around it allowed, as in a list written `--n "1000, 4000"`. Options with a range
/// parse through [`count_between`].
pub fn parse_count(text: &str) -> Result<u64, String> {
    let text = text.trim();
    if let Ok(count) = text.parse::<u64>() {
        return Ok(count);
    }
    match text.parse::<f64>() {
        Ok(value) if value >= 0.0 && value.fract() == 0.0 && value < u64::MAX as f64 => {
            Ok(value as u64)
        }
        _ => Err("must be a whole number of 0 or more, such as 1000 or 1e3".into()),
    }
}

/// A value parser for a count from `lo` to `hi`, in [`parse_count`]'s forms. A word, a fraction, a negative or a
/// count outside is refused with the range, so `--steps -1` and `--steps 0` get the same answer.
pub fn count_between<T: TryFrom<u64>>(
    lo: u64,
    hi: u64,
) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static {
    move |text| {
        parse_count(text)
            .ok()
            .filter(|count| (lo..=hi).contains(count))
            .and_then(|count| T::try_from(count).ok())
            .ok_or_else(|| {
                format!(
                    "must be a whole number from {lo} to {hi}, such as {lo} or 1e{}",
                    hi.max(10).ilog10().min(3)
                )
            })
    }
}

/// A number in a comma-separated list, with spaces around it allowed (`--v0 "1, 2"`).
pub fn parse_listed_number(text: &str) -> Result<f64, String> {
    text.trim()
        .parse::<f64>()
        .map_err(|_| "must be a number, such as 5, 0.5 or 1e4".into())
}

/// A progress bar of `len` on standard error, drawn by `template` with `what` as its message. `{rate}` gives the
/// rate to the unit ("34442/s"; indicatif's `{per_sec}` printed "34,442.3196/s").
pub fn progress_bar(len: u64, template: &str, what: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(len);
    if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
        bar.set_style(
            style
                .with_key(
                    "rate",
                    |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                        let _ = write!(w, "{:.0}/s", state.per_sec());
                    },
                )
                .progress_chars("=> "),
        );
    }
    bar.set_message(what.to_string());
    bar
}

/// A word in a comma-separated list, with spaces around it dropped (`--engines "ipc, penalty"`).
pub fn parse_listed_word(text: &str) -> Result<String, String> {
    Ok(text.trim().to_string())
}

/// Calls `handler` (on its own thread) on Ctrl-C, SIGTERM or SIGHUP, so a subcommand that writes a temporary
/// output can remove it before exiting. A signal that was ignored when the process started stays ignored: `nohup`
/// ignores SIGHUP, and a script's background job ignores SIGINT (ctrlc's `try_set_handler` then installs nothing at
/// all, not even for SIGTERM, which is how `export … & kill $!` used to leave a partial file behind).
pub fn on_stop_signal(handler: impl FnMut() + Send + 'static) {
    #[cfg(unix)]
    {
        let signals = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];
        let ignored = signals.map(signal_ignored);
        if ctrlc::set_handler(handler).is_ok() {
            for (signal, ignored) in signals.into_iter().zip(ignored) {
                if ignored {
                    ignore_signal(signal);
                } else {
                    remember_before_ctrlc(signal);
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrlc::try_set_handler(handler);
    }
}

/// The stop signal this process last received (0: none yet), for [`stop_signal_name`].
#[cfg(unix)]
static LAST_STOP_SIGNAL: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// The handler ctrlc installed for each signal number below 32, called by [`remember_signal`].
#[cfg(unix)]
static CTRLC_HANDLERS: [std::sync::atomic::AtomicUsize; 32] =
    [const { std::sync::atomic::AtomicUsize::new(0) }; 32];

/// The signal handler in front of ctrlc's: notes which signal came (ctrlc's handler does not say), then calls
/// ctrlc's. Only an atomic store and a call, so it is async-signal-safe as ctrlc's own handler is.
#[cfg(unix)]
extern "C" fn remember_signal(signal: libc::c_int) {
    use std::sync::atomic::Ordering;
    LAST_STOP_SIGNAL.store(signal, Ordering::SeqCst);
    let slot = usize::try_from(signal)
        .ok()
        .and_then(|i| CTRLC_HANDLERS.get(i));
    if let Some(slot) = slot {
        let handler = slot.load(Ordering::SeqCst);
        if handler != 0 {
            // SAFETY: `handler` is the one-argument handler ctrlc installed for this signal (remember_before_ctrlc
            // stores none other).
            let handler: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(handler) };
            handler(signal);
        }
    }
}

/// Puts [`remember_signal`] in front of the handler ctrlc installed for `signal`, with its flags and mask.
#[cfg(unix)]
fn remember_before_ctrlc(signal: libc::c_int) {
    use std::sync::atomic::Ordering;
    let Some(slot) = usize::try_from(signal)
        .ok()
        .and_then(|i| CTRLC_HANDLERS.get(i))
    else {
        return;
    };
    // SAFETY: reads the current action into a zeroed sigaction, and installs a copy of it whose handler is a
    // one-argument `extern "C"` function, as ctrlc's is (a three-argument SA_SIGINFO handler is left alone).
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(signal, std::ptr::null(), &mut current) != 0 {
            return;
        }
        let handler = current.sa_sigaction;
        if handler == libc::SIG_DFL
            || handler == libc::SIG_IGN
            || current.sa_flags & libc::SA_SIGINFO != 0
        {
            return;
        }
        slot.store(handler, Ordering::SeqCst);
        let mut chained = current;
        chained.sa_sigaction = remember_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::sigaction(signal, &chained, std::ptr::null_mut());
    }
}

/// The stop signal this process received, as messages name it: "Ctrl-C (SIGINT)", "SIGTERM" or "SIGHUP";
/// `None` before one came (or off Unix).
pub fn stop_signal_name() -> Option<&'static str> {
    #[cfg(unix)]
    {
        match LAST_STOP_SIGNAL.load(std::sync::atomic::Ordering::SeqCst) {
            libc::SIGINT => Some("Ctrl-C (SIGINT)"),
            libc::SIGTERM => Some("SIGTERM"),
            libc::SIGHUP => Some("SIGHUP"),
            _ => None,
        }
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// Is `signal`'s disposition "ignore"?
#[cfg(unix)]
fn signal_ignored(signal: libc::c_int) -> bool {
    // SAFETY: a null new action only reads the disposition into `old`, a zeroed, properly aligned sigaction.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal, std::ptr::null(), &mut old) == 0
            && old.sa_sigaction == libc::SIG_IGN
    }
}

/// Sets `signal`'s disposition back to "ignore".
#[cfg(unix)]
fn ignore_signal(signal: libc::c_int) {
    // SAFETY: SIG_IGN is a valid disposition for SIGINT, SIGTERM and SIGHUP; no handler code runs.
    unsafe {
        libc::signal(signal, libc::SIG_IGN);
    }
}

/// Removes, with a note on stderr for each, what saves of `out` killed outright left beside it
/// ([`crate::demo::remove_stale_temporaries`]; `what` names the temporary, `whose` the kind of save in the note:
/// "an export", "a recording"), and says which it left because they were written to lately.
pub fn note_stale_temporaries(out: &std::path::Path, what: &str, whose: &str) {
    let (removed, recent) = crate::demo::remove_stale_temporaries(out, what);
    for file in removed {
        stdout::errln!(
            "note: removed '{file}', the unfinished output of {whose} of '{}' whose process is gone",
            out.display()
        );
    }
    for file in recent {
        stdout::errln!(
            "note: left '{file}': its process is gone, but it was written to less than a minute ago (it may be \
             {whose}'s from another container); a later one removes it"
        );
    }
}

/// Formats a number compactly for labels: `1e4` for 10000, `0.5` for 0.5, `2.5e-5` for 0.000025.
pub fn compact_number(value: f64) -> String {
    if value == 0.0 || !value.is_finite() {
        return format!("{value}");
    }
    let magnitude = value.abs();
    if (1e-3..1e3).contains(&magnitude) {
        let text = format!("{value:.6}");
        let text = text.trim_end_matches('0').trim_end_matches('.');
        return text.to_string();
    }
    // Twelve significant digits at most, so 1e-9 · 1000 (1.0000000000000002e-6) reads 1e-6.
    crate::text::scientific(value, 12)
}

#[cfg(test)]
mod tests {
    use super::compact_number;

    /// Counts read as people write them: `1e3`, `1000.0`, with spaces from a list; a fraction, a negative, a word
    /// or an overflow is refused with the same words.
    #[test]
    fn a_count_may_be_written_1e3_and_a_listed_value_may_hold_spaces() {
        use super::{parse_count, parse_listed_number, parse_listed_word};
        assert_eq!(parse_count("1000"), Ok(1000));
        assert_eq!(parse_count("1e3"), Ok(1000));
        assert_eq!(parse_count(" 1000.0 "), Ok(1000));
        for bad in ["1.5", "-3", "abc", "", "1e30", "nan", "inf"] {
            assert_eq!(
                parse_count(bad),
                Err("must be a whole number of 0 or more, such as 1000 or 1e3".into()),
                "{bad:?}"
            );
        }
        let steps = super::count_between::<u64>(1, 100_000);
        assert_eq!(steps("1e3"), Ok(1000));
        for bad in ["0", "-1", "100001", "1.5", "x"] {
            assert_eq!(
                steps(bad),
                Err("must be a whole number from 1 to 100000, such as 1 or 1e3".into()),
                "{bad:?}"
            );
        }
        assert_eq!(
            super::count_between::<usize>(1, 100)("-2"),
            Err("must be a whole number from 1 to 100, such as 1 or 1e2".into())
        );
        assert_eq!(parse_listed_number(" 2"), Ok(2.0));
        assert!(parse_listed_number("two").is_err());
        assert_eq!(parse_listed_word(" penalty "), Ok("penalty".into()));
    }

    #[test]
    fn compact_numbers_read_like_the_seed() {
        assert_eq!(compact_number(1e4), "1e4");
        assert_eq!(compact_number(1e6), "1e6");
        assert_eq!(compact_number(2.5e5), "2.5e5");
        assert_eq!(compact_number(1.0), "1");
        assert_eq!(compact_number(0.5), "0.5");
        assert_eq!(compact_number(5e-4 * 1000.0), "0.5");
        // A product's last-bit noise is not shown: `throw --dhat 1e-9` heads its column "IPC d^=1e-6mm".
        assert_eq!(compact_number(1e-9 * 1000.0), "1e-6");
        assert_eq!(compact_number(-2.5e-7), "-2.5e-7");
        assert_eq!(compact_number(1e300), "1e300");
        assert_eq!(compact_number(1e-320), "1e-320");
        assert_eq!(compact_number(1.234567890123456e20), "1.23456789012e20");
    }
}
