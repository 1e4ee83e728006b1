//! Printing to standard output without panicking.
//!
//! `println!` panics when the write fails (a closed pipe, a full disk), so the binary would exit 101 with a
//! panic message. `outln!` and `out!` take `println!`'s and `print!`'s arguments and return
//! `Result<(), StdoutError>` instead; `?` turns it into an `anyhow::Error` that `main` recognises: a broken pipe
//! ends the process quietly, any other failure prints `error: cannot write to standard output: <reason>`.

use std::io::Write;

/// A failed write to standard output (the reader closed the pipe, the disk is full, …).
#[derive(Debug, thiserror::Error)]
#[error("cannot write to standard output: {0}")]
pub struct StdoutError(pub std::io::Error);

impl StdoutError {
    /// The reader went away (`… | head`): nothing is wrong with the output, nobody wants the rest.
    pub fn is_broken_pipe(&self) -> bool {
        self.0.kind() == std::io::ErrorKind::BrokenPipe
    }

    /// The [`StdoutError`] anywhere in `error`'s chain, if a write to standard output caused it.
    pub fn find(error: &anyhow::Error) -> Option<&StdoutError> {
        error.chain().find_map(|cause| cause.downcast_ref())
    }
}

/// Writes `text` to standard output and flushes it, so a failure is reported here and not lost at exit
/// (Rust flushes standard output at exit and ignores the error).
pub fn write_stdout(text: std::fmt::Arguments) -> Result<(), StdoutError> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_fmt(text)
        .and_then(|()| stdout.flush())
        .map_err(StdoutError)
}

/// Writes `value` as JSON, `pretty` or compact, and a newline to standard output through a buffer, and flushes
/// it ([`json_to`]). A failed write is a [`StdoutError`]; a value that cannot be serialised is another error.
pub fn write_json(value: &impl serde::Serialize, pretty: bool) -> anyhow::Result<()> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let written =
        json_to(&mut out, value, pretty).and_then(|()| out.flush().map_err(serde_json::Error::io));
    match written {
        Err(e) if e.is_io() => Err(StdoutError(e.into()).into()),
        Err(e) => Err(anyhow::anyhow!("cannot serialise the output: {e}")),
        Ok(()) => Ok(()),
    }
}

/// Writes `value` as JSON, `pretty` or compact, and a newline into `out`, serialising it as it goes (see
/// `run::WithParts`): what [`write_json`] prints.
pub fn json_to(
    out: &mut impl Write,
    value: &impl serde::Serialize,
    pretty: bool,
) -> serde_json::Result<()> {
    if pretty {
        serde_json::to_writer_pretty(&mut *out, value)?;
    } else {
        serde_json::to_writer(&mut *out, value)?;
    }
    writeln!(out).map_err(serde_json::Error::io)
}

/// `println!` that returns `Result<(), StdoutError>` instead of panicking: `outln!("{x}")?;`.
macro_rules! outln {
    () => {
        $crate::cli::stdout::write_stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::cli::stdout::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` that returns `Result<(), StdoutError>` instead of panicking: `out!("{table}")?;`.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::stdout::write_stdout(format_args!($($arg)*))
    };
}

/// `eprintln!` that never panics: a message or note on standard error is dropped when stderr is gone (a pipe
/// whose reader Ctrl-C ended with us, `2>&-`), where `eprintln!` panicked and the process exited 101 instead of
/// its own status.
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub(crate) use {errln, out, outln};
