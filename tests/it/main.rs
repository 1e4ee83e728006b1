//! All integration tests live in this one crate, so Bevy is linked once.

mod bench;
mod demo;
mod demo_fuzz;
mod export;
mod friction;
mod robustness;
mod rod;
mod scene;
mod sim;
mod spec_formulas;
mod stdout;
mod throw;

/// A child process whose standard error is read line by line on a thread, and which is killed, with `fifo`
/// removed, however the test ends: a child left waiting on its FIFO would never end.
pub struct Watched {
    pub child: std::process::Child,
    fifo: std::path::PathBuf,
    heard: std::sync::mpsc::Receiver<String>,
    /// The lines of standard error heard so far.
    pub said: Vec<String>,
}

impl Watched {
    /// A new FIFO at `fifo` (anything there removed first) and a command of this crate's binary to run beside it;
    /// `None`, with a word, where mkfifo is not available.
    pub fn binary_beside_fifo(fifo: &std::path::Path) -> Option<std::process::Command> {
        let _ = std::fs::remove_file(fifo);
        if !contact_sandbox::testing::make_fifo(fifo) {
            eprintln!("mkfifo is not available here; skipped");
            return None;
        }
        Some(std::process::Command::new(env!(
            "CARGO_BIN_EXE_contact-sandbox"
        )))
    }

    /// Starts `command` (its standard error piped here) beside the FIFO `fifo`.
    pub fn start(mut command: std::process::Command, fifo: &std::path::Path) -> Watched {
        use std::io::BufRead;
        let mut child = command
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("starts");
        let stderr = child.stderr.take().expect("piped");
        let (lines, heard) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        Watched {
            child,
            fifo: fifo.to_path_buf(),
            heard,
            said: Vec::new(),
        }
    }

    /// Waits for the line `word` on standard error, however slowly a loaded machine starts the binary (at most
    /// two minutes), and checks that the child is still running.
    pub fn hear(&mut self, word: &str) {
        while !self.said.iter().any(|l| l == word) {
            match self.heard.recv_timeout(std::time::Duration::from_secs(120)) {
                Ok(line) => self.said.push(line),
                Err(e) => panic!("no {word:?} ({e}); it said {:?}", self.said),
            }
        }
        assert!(
            self.child.try_wait().expect("polls").is_none(),
            "it did not wait: {:?}",
            self.said
        );
    }

    /// Waits for the child to end, and checks that it succeeded and said `word` exactly once (every line of its
    /// standard error is then in `said`).
    pub fn finish_having_said_once(&mut self, word: &str) {
        let status = self.child.wait().expect("ends");
        self.said.extend(self.heard.iter());
        assert!(status.success(), "{:?}", self.said);
        assert_eq!(
            self.said.iter().filter(|l| *l == word).count(),
            1,
            "{:?}",
            self.said
        );
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.fifo);
    }
}
