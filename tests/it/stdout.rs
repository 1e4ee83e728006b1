//! Standard output that cannot be written: a reader that went away (`… | head`) ends the process quietly, a
//! full disk is one line of error; neither is a panic (exit 101).

use std::io::ErrorKind;
use std::process::{Command, Output, Stdio};

/// One quick run of each subcommand that prints to standard output, table and JSON forms.
const PRINTING_RUNS: &[&[&str]] = &[
    &["throw", "--v0", "1", "--steps", "5"],
    &["throw", "--v0", "1", "--steps", "5", "--json"],
    &["rod"],
    &["rod", "--json"],
    &[
        "run",
        "--scene",
        "assets/scenes/wall_throw.ron",
        "--steps",
        "5",
    ],
    &[
        "run",
        "--scene",
        "assets/scenes/wall_throw.ron",
        "--steps",
        "5",
        "--json",
    ],
    // 2 000 balls: about 200 KB of JSON, so the write fails while the balls are being serialised, not at the
    // last flush.
    &[
        "run",
        "--scene",
        "assets/scenes/ball_pit_2000.ron",
        "--steps",
        "1",
        "--json",
    ],
    &["bench-one", "--engine", "ipc", "--n", "10", "--steps", "2"],
    &["replay", "assets/demos/wall_throw.demo.ron"],
    &["replay", "assets/demos/wall_throw.demo.ron", "--json"],
    &["--help"],
];

fn run_with_stdout(argv: &[&str], stdout: Stdio) -> std::io::Result<std::process::Child> {
    Command::new(env!("CARGO_BIN_EXE_contact-sandbox"))
        .args(argv)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
}

fn finish(child: std::process::Child, argv: &[&str]) -> (Output, String) {
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{argv:?}: {stderr}");
    (out, stderr)
}

/// A pipe whose reading end is already closed: the child's first write to it fails with a broken pipe.
fn closed_pipe() -> Stdio {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    Stdio::from(writer)
}

#[test]
fn a_closed_pipe_ends_every_subcommand_quietly_with_status_0() {
    for &argv in PRINTING_RUNS {
        let child =
            run_with_stdout(argv, closed_pipe()).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        let (out, stderr) = finish(child, argv);
        assert_eq!(out.status.code(), Some(0), "{argv:?}: {stderr}");
        assert_eq!(stderr, "", "{argv:?}");
    }
}

#[test]
fn a_closed_pipe_does_not_hide_a_failed_verification() {
    // The shipped demo with one stored hash changed: the replay differs at that tick.
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demos/wall_throw.demo.ron"),
    )
    .expect("reads the shipped demo");
    let at = text.find("hash: \"").expect("a stored hash") + "hash: \"".len();
    let flipped = if &text[at..at + 1] == "0" { "1" } else { "0" };
    let edited = format!("{}{flipped}{}", &text[..at], &text[at + 1..]);
    let path = std::env::temp_dir().join(format!(
        "contact-sandbox-stdout-mismatch-{}.demo.ron",
        std::process::id()
    ));
    std::fs::write(&path, edited).expect("writes the edited demo");
    let path_text = path.display().to_string();
    for argv in [
        ["replay", path_text.as_str(), "--verify"],
        ["replay", path_text.as_str(), "--json"],
    ] {
        let child =
            run_with_stdout(&argv, closed_pipe()).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        let (out, stderr) = finish(child, &argv);
        assert_eq!(out.status.code(), Some(1), "{argv:?}: {stderr}");
        assert!(
            stderr.contains("differs from the recording"),
            "{argv:?}: {stderr}"
        );
    }
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_full_device_is_one_line_of_error_and_status_1() {
    // Opened for writing only, as `> /dev/full` does; writes to it fail with "No space left on device".
    let full = match std::fs::OpenOptions::new().write(true).open("/dev/full") {
        Ok(full) => full,
        Err(e) if e.kind() == ErrorKind::NotFound => return,
        Err(e) => panic!("/dev/full: {e}"),
    };
    for &argv in PRINTING_RUNS {
        let stdout = full
            .try_clone()
            .unwrap_or_else(|e| panic!("/dev/full: {e}"));
        let child =
            run_with_stdout(argv, Stdio::from(stdout)).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        let (out, stderr) = finish(child, argv);
        assert_eq!(out.status.code(), Some(1), "{argv:?}: {stderr}");
        assert!(
            stderr.starts_with("error: cannot write to standard output: No space left on device"),
            "{argv:?}: {stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "{argv:?}: {stderr}");
    }
}
