//! The headless subcommands. Each builds scenes and steps lanes through the same
//! [`crate::physics::world::LaneWorld`] the sandbox runs.

pub mod bench;
pub mod demo;
pub mod export;
pub mod rod;
pub mod run;
pub mod stdout;
pub mod throw;

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
    format!("{value:e}")
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
    }
}
