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

/// Unicode's explicit bidirectional formatting characters (embeddings, overrides, isolates and marks): printed raw
/// they reverse or reorder the rest of a terminal line or a panel's label.
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// `text` in double quotes, with its quotes and backslashes escaped (`say "hi"` → `"say \"hi\""`), for names in
/// printed text. Unlike `{:?}`, letters with combining marks (the d̂ in a lane's name) stay as written; names hold no
/// control characters (scene files refuse them).
pub fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        if matches!(c, '"' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// `text` as one plain line: control characters (a newline, an escape sequence's ESC), the line and paragraph
/// separators and bidirectional formatting characters are written as escapes (`\n`, `\u{1b}`, `\u{202e}`), so a
/// file name or a value quoted in a message can neither break the line nor drive the terminal.
pub fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() || is_bidi_control(c) || matches!(c, '\u{2028}' | '\u{2029}') {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

/// The longest file name most file systems take, in bytes.
pub const MAX_FILE_NAME_BYTES: usize = 255;

/// `{prefix}{name}{suffix}`, the name of a temporary file beside `name`, with `name` cut short (at a character
/// boundary) so the whole stays within [`MAX_FILE_NAME_BYTES`]: a legal 250-byte output name must not fail
/// because its temporary sibling's name is too long.
pub fn temporary_name(prefix: &str, name: &str, suffix: &str) -> String {
    let room = MAX_FILE_NAME_BYTES.saturating_sub(prefix.len() + suffix.len());
    let mut cut = name.len().min(room);
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{prefix}{}{suffix}", &name[..cut])
}

/// A number as a message quotes it: as Rust writes it from 10⁻⁴ to below 10⁶, in scientific notation outside
/// (`1e300`, not its 301 digits; `1e-20`, not 21 zeros; `1e12`). An infinity says where it came from: a literal
/// such as `1e999` in a scene file or on the command line is read as one.
pub fn number(value: f64) -> String {
    if value.is_infinite() {
        let sign = if value < 0.0 { "-" } else { "" };
        format!(
            "{sign}inf (a number beyond ±1.8e308, the largest a 64-bit float holds, reads as infinity)"
        )
    } else if value.abs() >= 1e6 || (value != 0.0 && value.abs() < 1e-4) {
        format!("{value:e}")
    } else {
        format!("{value}")
    }
}

/// A number as [`number`] writes it, rounded to six significant digits: a title or a note quotes a slider's
/// 10^0.5 N/m as "3.16228", not "3.1622776601683795", and a clock summed step by step (0.09900000000000002 s) as
/// "0.099".
pub fn significant(value: f64) -> String {
    number(format!("{value:.5e}").parse().unwrap_or(value))
}

/// `value` with `decimals` digits after the point, without a minus sign on a value that rounds to zero: a rod at
/// rest reads "θ = 0.0000", not "-0.0000".
pub fn fixed(value: f64, decimals: usize) -> String {
    let text = format!("{value:.decimals$}");
    match text.strip_prefix('-') {
        Some(magnitude) if magnitude.chars().all(|c| c == '0' || c == '.') => magnitude.to_string(),
        _ => text,
    }
}

/// `n` and the noun, singular for one: `1 action`, `3 actions`, `1 hash`, `0 hashes`.
pub fn counted(n: u64, one: &str, many: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {many}")
    }
}

/// A length ≥ 0 for people: micrometres to a tenth below 1 mm (the seed prints its gaps so), millimetres to a
/// hundredth below 1 m, metres above; "26900.8 µm" reads as "26.90 mm". Below 1 µm, where a tenth of a micrometre
/// is no longer enough digits (a pile's gaps of 0.34 µm, a d̂ of 10⁻⁹ m read "0.0 µm"), nanometres to a tenth, and
/// below a tenth of a nanometre metres in scientific notation.
pub fn length_text(metres: f64) -> String {
    // Each unit is used while its rounded figure stays below 1000: 0.99996 µm reads "1.0 µm", not "1000.0 nm".
    let below_1000 = |scaled: f64, decimals: i32| {
        let step = 10f64.powi(decimals);
        (scaled * step).round() / step < 1000.0
    };
    if metres > 0.0 && metres < 1e-10 {
        format!("{metres:.1e} m")
    } else if metres > 0.0 && below_1000(metres * 1e9, 1) {
        format!("{:.1} nm", metres * 1e9)
    } else if below_1000(metres * 1e6, 1) {
        format!("{:.1} µm", metres * 1e6)
    } else if below_1000(metres * 1e3, 2) {
        format!("{:.2} mm", metres * 1e3)
    } else {
        format!("{metres:.3} m")
    }
}

/// `value` in scientific notation: its shortest form (which reads back as `value`) where that has at most `digits`
/// significant digits, else rounded to `digits` with trailing zeros dropped.
pub fn scientific(value: f64, digits: usize) -> String {
    let shortest = format!("{value:e}");
    let written = shortest
        .split('e')
        .next()
        .map_or(0, |m| m.chars().filter(char::is_ascii_digit).count());
    if written <= digits {
        return shortest;
    }
    let decimals = digits.saturating_sub(1);
    let rounded = format!("{value:.decimals$e}");
    match rounded.split_once('e') {
        Some((mantissa, exponent)) => {
            let mantissa = mantissa.trim_end_matches('0').trim_end_matches('.');
            format!("{mantissa}e{exponent}")
        }
        None => rounded,
    }
}

/// The option parser's error (`clap`'s rendering: a first paragraph, then a usage block, tips and a pointer to
/// `--help`) as the one line the CLI prints: the first paragraph's lines joined, so that what is missing or allowed
/// stays ("the following required arguments were not provided: --scene <SCENE>", "invalid value 'x' for
/// '--encoder <ENCODER>' [possible values: gif, openh264]"), and any tip after it ("tip: a similar argument exists:
/// '--v0'"). The usage block and the pointer to `--help` are left out.
pub fn parser_error_line(rendered: &str) -> String {
    // clap's sections after its message, each after a blank line; a blank line inside the message (in a quoted
    // value) does not end it.
    let is_section = |p: &str| {
        ["Usage:", "tip:", "For more information"]
            .iter()
            .any(|s| p.trim_start().starts_with(s))
    };
    let mut parts = rendered.trim().split("\n\n");
    let mut message = parts.next().unwrap_or_default().to_string();
    let mut sections = Vec::new();
    for part in parts {
        if is_section(part) || !sections.is_empty() {
            sections.push(part.trim());
        } else {
            message.push_str("\n\n");
            message.push_str(part);
        }
    }
    // clap lists what is missing or allowed on indented lines after the message's first: they join it, comma
    // separated. Any other line break is the quoted value's own (escaped when printed).
    let mut line = String::new();
    let mut listed = 0;
    for (k, text) in message.split('\n').enumerate() {
        if k == 0 {
            line.push_str(text);
        } else if text.starts_with("  ") && !text.trim().is_empty() {
            line.push_str(if listed == 0 { " " } else { ", " });
            line.push_str(text.trim());
            listed += 1;
        } else {
            line.push('\n');
            line.push_str(text);
        }
    }
    for tip in sections.iter().filter(|p| p.starts_with("tip:")) {
        let tip: Vec<&str> = tip.lines().map(str::trim).collect();
        line.push_str("; ");
        line.push_str(&tip.join(" "));
    }
    if line.trim().is_empty() {
        "error: invalid arguments".to_string()
    } else {
        line
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn significant_rounds_to_six_digits_and_writes_as_number_does() {
        use super::significant;
        assert_eq!(significant(10f64.powf(0.5)), "3.16228");
        assert_eq!(significant(0.09900000000000002), "0.099");
        assert_eq!(significant(1.0 / 60.0), "0.0166667");
        assert_eq!(significant(1e6), "1e6");
        assert_eq!(significant(2.5e-9), "2.5e-9");
        assert_eq!(significant(0.0), "0");
    }

    #[test]
    fn one_line_escapes_what_would_break_the_line_or_drive_the_terminal() {
        use super::one_line;
        assert_eq!(one_line("plain ✓ µm, ±1e6 — ok"), "plain ✓ µm, ±1e6 — ok");
        assert_eq!(one_line("a\nb.ron"), "a\\nb.ron");
        assert_eq!(
            one_line("x\u{1b}]0;pwned\u{7}.ron"),
            "x\\u{1b}]0;pwned\\u{7}.ron"
        );
        assert_eq!(one_line("tab\there\r"), "tab\\there\\r");
        assert_eq!(one_line("rtl \u{202e}cba"), "rtl \\u{202e}cba");
        assert_eq!(one_line("para\u{2029}graph"), "para\\u{2029}graph");
    }

    #[test]
    fn a_temporary_name_stays_within_the_file_name_limit() {
        use super::{MAX_FILE_NAME_BYTES, temporary_name};
        assert_eq!(temporary_name(".", "clip.gif", ".tmp-7"), ".clip.gif.tmp-7");
        let long = "é".repeat(127);
        let name = temporary_name(".", &long, ".partial-4194304");
        assert!(name.len() <= MAX_FILE_NAME_BYTES, "{}", name.len());
        assert!(name.starts_with(".é") && name.ends_with("é.partial-4194304"));
        assert_eq!(name.len(), 1 + 2 * 119 + 16);
    }

    use super::{abbreviate, counted, fixed, number, parser_error_line};

    #[test]
    fn a_value_that_rounds_to_zero_has_no_minus_sign() {
        assert_eq!(fixed(-0.0, 4), "0.0000");
        assert_eq!(fixed(-1e-7, 4), "0.0000");
        assert_eq!(fixed(-0.00005, 4), "-0.0001");
        assert_eq!(fixed(-1.5, 2), "-1.50");
        assert_eq!(fixed(0.25, 3), "0.250");
        assert_eq!(fixed(-0.0, 0), "0");
        assert_eq!(fixed(f64::NAN, 2), "NaN");
    }

    #[test]
    fn numbers_are_quoted_compactly() {
        assert_eq!(number(1e300), "1e300");
        assert_eq!(number(-1e300), "-1e300");
        assert_eq!(number(1e-20), "1e-20");
        assert_eq!(number(0.5), "0.5");
        assert_eq!(number(1e12), "1e12");
        assert_eq!(number(1e-9), "1e-9");
        assert_eq!(number(999_999.0), "999999");
        assert_eq!(number(0.0001), "0.0001");
        assert_eq!(number(-3.0), "-3");
        assert_eq!(number(0.0), "0");
        assert_eq!(number(f64::NAN), "NaN");
        assert_eq!(
            number(f64::INFINITY),
            "inf (a number beyond ±1.8e308, the largest a 64-bit float holds, reads as infinity)"
        );
        assert!(number(f64::NEG_INFINITY).starts_with("-inf (a number beyond"));
    }

    /// clap's sections after the message are dropped or kept as tips; a blank line inside a quoted value is not
    /// one of them.
    #[test]
    fn a_parser_error_keeps_its_message_whole_and_its_tips() {
        let rendered = "error: invalid value 'a\n\nb' for '--k <K>': invalid float literal\n\n\
                        tip: a similar argument exists: '--v0'\n\nUsage: contact-sandbox throw [OPTIONS]\n\n\
                        For more information, try '--help'.\n";
        assert_eq!(
            parser_error_line(rendered),
            "error: invalid value 'a\n\nb' for '--k <K>': invalid float literal; tip: a similar argument exists: \
             '--v0'"
        );
        let missing = "error: the following required arguments were not provided:\n  --script <SCRIPT>\n  \
                       --out <OUT>\n\nUsage: contact-sandbox record --script <SCRIPT> --out <OUT>\n";
        assert_eq!(
            parser_error_line(missing),
            "error: the following required arguments were not provided: --script <SCRIPT>, --out <OUT>"
        );
        assert_eq!(parser_error_line(""), "error: invalid arguments");
    }

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(counted(1, "action", "actions"), "1 action");
        assert_eq!(counted(0, "hash", "hashes"), "0 hashes");
        assert_eq!(counted(31, "hash", "hashes"), "31 hashes");
    }

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
