//! Text for messages.

/// `text` as a message quotes it: whole up to `max` characters, else its first `max` and how many more there are,
/// so a 10 MB value makes a one-line message, not a 10 MB one.
pub fn abbreviate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((cut, _)) => format!(
            "{}… ({} more characters)",
            &text[..cut],
            text[cut..].chars().count()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::abbreviate;

    #[test]
    fn long_values_are_cut_with_a_count_and_short_ones_kept() {
        assert_eq!(abbreviate("1e300", 64), "1e300");
        assert_eq!(abbreviate("abcdef", 6), "abcdef");
        assert_eq!(abbreviate("abcdefgh", 6), "abcdef… (2 more characters)");
        // Characters, not bytes: a cut never splits one.
        assert_eq!(abbreviate("µµµµ", 2), "µµ… (2 more characters)");
        assert_eq!(
            abbreviate(&"9".repeat(100_000), 8),
            "99999999… (99992 more characters)"
        );
    }
}
