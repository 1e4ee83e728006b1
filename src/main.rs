//! `contact-sandbox`: with no subcommand, opens the sandbox; otherwise runs a headless experiment.

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use contact_sandbox::cli::stdout::StdoutError;
use contact_sandbox::cli::{bench, demo, export, rod, run, throw};

#[derive(Parser, Debug)]
#[command(
    name = "contact-sandbox",
    version,
    about = "A 2D contact-mechanics sandbox: penalty vs IPC, rods on a floor"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// The seed's wall experiment (SPEC §2): penalty vs IPC at several speeds.
    Throw(throw::ThrowArgs),
    /// One rod–floor impact in exact rational arithmetic (SPEC §3).
    Rod(rod::RodArgs),
    /// Step every lane of a scene file headless and report.
    Run(run::RunArgs),
    /// The reference ball pit for IPC, penalty and rapier2d (SPEC §6).
    Bench(bench::BenchArgs),
    /// Record a demo headless from a scene and a script of timed actions (SPEC §5).
    Record(demo::RecordArgs),
    /// Re-simulate a demo headless and check every stored state hash.
    Replay(demo::ReplayArgs),
    /// Render a demo offscreen to a GIF, an MP4 or PNG frames.
    Export(export::ExportArgs),
    /// One benchmark run in this process (used by `bench`).
    #[command(hide = true)]
    BenchOne(bench::BenchOneArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version, on standard output.
            return match e.print() {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => stdout_failed(&StdoutError(error)),
            };
        }
        Err(e) => {
            report(&contact_sandbox::text::parser_error_line(&e.to_string()));
            // A value the option refuses (`--fps 0`, `--steps -1`, `--encoder x264`) exits 1, as a value refused
            // after parsing does (`--steps 0`); 2 is left for a command line clap cannot read (an unknown option, a
            // missing value or argument).
            return if refused_value(&e) {
                ExitCode::FAILURE
            } else {
                ExitCode::from(2)
            };
        }
    };
    let result = match cli.command {
        Some(Command::Throw(args)) => throw::run_throw(&args),
        Some(Command::Rod(args)) => rod::run_rod(&args),
        Some(Command::Run(args)) => run::run_run(&args),
        Some(Command::Bench(args)) => bench::run_bench(&args),
        Some(Command::Record(args)) => demo::run_record(&args),
        Some(Command::Replay(args)) => demo::run_replay(&args),
        Some(Command::Export(args)) => {
            contact_sandbox::app::explain_a_missing_gpu("export");
            export::run_export(&args)
        }
        Some(Command::BenchOne(args)) => bench::run_bench_one(&args),
        None => {
            contact_sandbox::app::explain_a_missing_gpu("the window");
            contact_sandbox::app::run_gui()
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // Ctrl-C closed the window: the status a shell gives an interrupted command, and nothing to report.
        Err(e)
            if e.downcast_ref::<contact_sandbox::app::Interrupted>()
                .is_some() =>
        {
            ExitCode::from(130)
        }
        Err(e) => match StdoutError::find(&e) {
            Some(error) => stdout_failed(error),
            None => {
                report(&format!("error: {e:#}"));
                // Stopped by Ctrl-C, SIGTERM or SIGHUP (an export that removed its temporary output first): the
                // status a shell gives an interrupted command, as `record` and a second signal exit with.
                if contact_sandbox::cli::stop_signal_name().is_some() {
                    ExitCode::from(130)
                } else {
                    ExitCode::FAILURE
                }
            }
        },
    }
}

/// Did clap refuse a value the command line gave (its parser's range or format, or a word outside an option's
/// choices), rather than fail to read the command line? An option given without its value (`--fps` at the end) is
/// reported by clap as an invalid empty value: that is a command line it cannot read.
fn refused_value(error: &clap::Error) -> bool {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    match error.kind() {
        ErrorKind::ValueValidation => true,
        ErrorKind::InvalidValue => matches!(
            error.get(ContextKind::InvalidValue),
            Some(ContextValue::String(value)) if !value.is_empty()
        ),
        _ => false,
    }
}

/// A failed write to standard output. A broken pipe (`contact-sandbox run … | head`) exits quietly with status 0,
/// as ripgrep does: the reader chose to stop, nothing went wrong here, and `set -o pipefail` scripts keep working
/// (the conventional alternative, dying of SIGPIPE, would show as 141 in the shell). Anything else (a full disk)
/// prints one line and exits 1.
fn stdout_failed(error: &StdoutError) -> ExitCode {
    if error.is_broken_pipe() {
        return ExitCode::SUCCESS;
    }
    report(&format!("error: {error}"));
    ExitCode::FAILURE
}

/// One line on standard error, with any control or bidirectional formatting character in it (a file name's
/// newline or escape sequence) escaped; `eprintln!` would panic if the write fails too, and there is nowhere left
/// to say so.
fn report(line: &str) {
    let _ = writeln!(
        std::io::stderr(),
        "{}",
        contact_sandbox::text::one_line(line)
    );
}
