//! The headless subcommands. Each builds scenes and steps lanes through the same
//! [`crate::physics::world::LaneWorld`] the sandbox runs.

pub mod bench;
pub mod demo;
pub mod export;
pub mod rod;
pub mod run;
pub mod stdout;
pub mod throw;

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
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrlc::try_set_handler(handler);
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
    // The shortest form that reads back as `value`, unless it needs more than twelve significant digits: then
    // twelve, so 1e-9 · 1000 (1.0000000000000002e-6) reads 1e-6.
    let shortest = format!("{value:e}");
    let digits = shortest
        .split('e')
        .next()
        .map_or(0, |m| m.chars().filter(char::is_ascii_digit).count());
    if digits <= 12 {
        return shortest;
    }
    let text = format!("{value:.11e}");
    match text.split_once('e') {
        Some((mantissa, exponent)) => {
            let mantissa = mantissa.trim_end_matches('0').trim_end_matches('.');
            format!("{mantissa}e{exponent}")
        }
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::compact_number;

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
