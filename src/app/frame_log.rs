//! Frame-rate measurement for the window, switched on by environment variables (see [`super`]):
//!
//! - `CONTACT_SANDBOX_FPS_LOG=SECONDS` prints `fps: 41.3 over 5.0 s (207 frames)` to stderr after every window
//!   of at least SECONDS of real time;
//! - `CONTACT_SANDBOX_HIDE_UI=1` starts with the UI hidden, as Tab does.
//!
//! `tools/window-fps` runs the window under a virtual display with the log on (and the UI hidden if asked) and
//! averages the last counts; the frame rates in docs/performance.md are measured that way.

use anyhow::Context;
use bevy::prelude::*;

const FPS_LOG: &str = "CONTACT_SANDBOX_FPS_LOG";
const HIDE_UI: &str = "CONTACT_SANDBOX_HIDE_UI";

/// What the variables ask for. [`super::run_gui`] starts the UI hidden if asked; [`FrameLogPlugin`] logs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FramePlan {
    /// Length of one logged window [s], if frames are logged.
    pub log_every: Option<f32>,
    /// Whether the UI starts hidden.
    pub hide_ui: bool,
}

impl FramePlan {
    /// Reads the variables; a value that is not valid UTF-8 is an error too.
    pub fn from_env() -> anyhow::Result<FramePlan> {
        let var = |name: &str| match std::env::var(name) {
            Ok(value) => Ok(Some(value)),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(value)) => {
                Err(anyhow::anyhow!("{name} is not valid UTF-8: {value:?}"))
            }
        };
        FramePlan::parse(var(FPS_LOG)?.as_deref(), var(HIDE_UI)?.as_deref())
    }

    /// The plan for the variables' values (`None`: unset).
    pub fn parse(log_every: Option<&str>, hide_ui: Option<&str>) -> anyhow::Result<FramePlan> {
        let log_every = log_every
            .map(|text| {
                text.trim()
                    .parse::<f32>()
                    .ok()
                    .filter(|s| (0.1..=3600.0).contains(s))
                    .with_context(|| {
                        format!("{FPS_LOG} must be a number of seconds in 0.1..=3600, got {text:?}")
                    })
            })
            .transpose()?;
        let hide_ui = match hide_ui.map(str::trim) {
            None | Some("0") | Some("false") => false,
            Some("1") | Some("true") => true,
            Some(other) => anyhow::bail!("{HIDE_UI} must be 1, true, 0 or false, got {other:?}"),
        };
        Ok(FramePlan { log_every, hide_ui })
    }
}

/// Counts frames over windows of real time (what `CONTACT_SANDBOX_FPS_LOG` prints).
#[derive(Clone, Debug, PartialEq)]
pub struct FrameWindow {
    length: f32,
    elapsed: f32,
    frames: u32,
}

impl FrameWindow {
    /// Windows of at least `length` seconds.
    pub fn new(length: f32) -> FrameWindow {
        FrameWindow {
            length,
            elapsed: 0.0,
            frames: 0,
        }
    }

    /// Adds a frame that took `dt` seconds; at the end of a window, its `(seconds, frames)`, and a new window
    /// starts.
    pub fn tick(&mut self, dt: f32) -> Option<(f32, u32)> {
        self.elapsed += dt;
        self.frames += 1;
        if self.elapsed < self.length {
            return None;
        }
        let done = (self.elapsed, self.frames);
        (self.elapsed, self.frames) = (0.0, 0);
        Some(done)
    }
}

/// Prints the frame rate to stderr after every window of `log_every` seconds, if set.
pub struct FrameLogPlugin {
    pub log_every: Option<f32>,
}

impl Plugin for FrameLogPlugin {
    fn build(&self, app: &mut App) {
        if let Some(length) = self.log_every {
            let mut window = FrameWindow::new(length);
            app.add_systems(Last, move |time: Res<Time<Real>>| {
                if let Some((seconds, frames)) = window.tick(time.delta_secs()) {
                    crate::cli::stdout::errln!(
                        "fps: {:.1} over {seconds:.1} s ({frames} frames)",
                        frames as f32 / seconds
                    );
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_closes_once_its_length_has_passed_and_the_next_starts_empty() {
        let mut window = FrameWindow::new(1.0);
        for _ in 0..3 {
            assert_eq!(window.tick(0.25), None);
        }
        // The fourth quarter reaches the length: four frames in one second.
        assert_eq!(window.tick(0.25), Some((1.0, 4)));
        // A long frame closes a window by itself.
        assert_eq!(window.tick(0.5), None);
        assert_eq!(window.tick(2.0), Some((2.5, 2)));
        assert_eq!(window.tick(0.1), None);
    }

    #[test]
    fn the_variables_are_checked_and_named_in_their_errors() {
        assert_eq!(
            FramePlan::parse(None, None).ok(),
            Some(FramePlan::default())
        );
        assert_eq!(
            FramePlan::parse(Some(" 5 "), Some("1")).ok(),
            Some(FramePlan {
                log_every: Some(5.0),
                hide_ui: true
            })
        );
        assert_eq!(
            FramePlan::parse(None, Some("false")).ok(),
            Some(FramePlan::default())
        );
        for bad in ["0", "-1", "fast", "1e9", "NaN", "inf"] {
            let error = FramePlan::parse(Some(bad), None)
                .expect_err(bad)
                .to_string();
            assert!(error.contains(FPS_LOG) && error.contains(bad), "{error}");
        }
        let error = FramePlan::parse(None, Some("yes"))
            .expect_err("yes")
            .to_string();
        assert!(
            error.contains(HIDE_UI) && error.contains("\"yes\""),
            "{error}"
        );
    }
}
