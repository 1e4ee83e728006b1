//! Helpers shared by the unit tests in `src/` and the integration tests in `tests/it/`; not part of the API.

/// Makes a FIFO at `path` with mkfifo(1); false when that is not possible here.
#[cfg(unix)]
pub fn make_fifo(path: &std::path::Path) -> bool {
    std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .is_ok_and(|s| s.success())
}

/// Makes a FIFO at `path` and opens it for reading without blocking (Linux's O_NONBLOCK), before anything writes
/// to it: code that wrongly replaced the FIFO instead of writing into it then leaves the reader with an empty
/// pipe, not waiting forever for a writer. What is written must fit in the pipe's buffer (64 KiB on Linux), since
/// nothing reads while it is written. `None` when mkfifo is not available here.
#[cfg(unix)]
pub fn fifo_with_reader(path: &std::path::Path) -> Option<std::io::Result<std::fs::File>> {
    use std::os::unix::fs::OpenOptionsExt;
    const O_NONBLOCK: i32 = 0o4000;
    make_fifo(path).then(|| {
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(O_NONBLOCK)
            .open(path)
    })
}

/// A small deterministic generator of values in `[0, 1)` (a 64-bit LCG's top 53 bits), for tests that need
/// reproducible random layouts.
pub fn uniform(seed: u64) -> impl FnMut() -> f64 {
    let mut state = seed;
    move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 11) as f64) / ((1u64 << 53) as f64)
    }
}
