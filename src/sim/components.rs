//! Components and resources of the simulation layer: what a lane, a body and a wall hold in the ECS.

use std::collections::VecDeque;
use std::path::PathBuf;

use bevy::prelude::*;

use crate::physics::DVec2;
use crate::physics::world::{ContactSettings, LaneWorld};
use crate::scene::Scene;

/// Samples kept per lane for the live plots (20 s at 100 Hz).
pub const HISTORY_LEN: usize = 2000;

/// Render units per metre: the app draws 1 mm as one world unit, so text and gizmos keep sane sizes.
pub const UNITS_PER_METRE: f32 = 1000.0;

/// One independent physics world (SPEC §4). The lane owns its [`LaneWorld`]; body entities mirror it.
#[derive(Component)]
pub struct Lane {
    /// Position of the lane in the scene (0 = first in the file).
    pub index: usize,
    /// The physics state, stepped only through [`LaneWorld::step`].
    pub world: LaneWorld,
    /// Where the lane is drawn: lane-local metres + `offset` = scene metres.
    pub offset: DVec2,
    /// Lane-local bounding box `(min, max)` of walls, balls and rods at build time [m].
    pub bounds: (DVec2, DVec2),
    /// The entity mirroring `world.balls[i]`.
    pub ball_entities: Vec<Entity>,
    /// The entity mirroring `world.rods[i]`.
    pub rod_entities: Vec<Entity>,
    /// The entity mirroring `world.walls[k]`.
    pub wall_entities: Vec<Entity>,
}

impl Lane {
    /// A lane drawn at `offset` within `bounds`, with no entities mirroring its bodies yet.
    pub fn new(index: usize, world: LaneWorld, offset: DVec2, bounds: (DVec2, DVec2)) -> Lane {
        Lane {
            index,
            world,
            offset,
            bounds,
            ball_entities: Vec::new(),
            rod_entities: Vec::new(),
            wall_entities: Vec::new(),
        }
    }
}

/// The editable contact settings of a lane. Edits are validated with [`crate::scene::check_contact`] before the
/// next step and only then copied into the lane's world; an invalid edit is reverted and reported.
#[derive(Component, Clone, Debug, PartialEq)]
pub struct LaneSettings(pub ContactSettings);

/// A body or wall belongs to this lane entity.
#[derive(Component, Clone, Copy, Debug, PartialEq, Eq, Reflect)]
#[reflect(Component)]
pub struct LaneMember(pub Entity);

/// Mirrors `world.balls[index]` of its lane.
#[derive(Component, Clone, Copy, Debug, PartialEq, Reflect)]
#[reflect(Component)]
pub struct Ball {
    pub index: usize,
    /// Radius [m] (0 is the seed's point ball).
    pub radius: f64,
    /// Mass [kg].
    pub mass: f64,
}

/// Mirrors `world.rods[index]` of its lane.
#[derive(Component, Clone, Copy, Debug, PartialEq, Reflect)]
#[reflect(Component)]
pub struct Rod {
    pub index: usize,
    /// Length L [m].
    pub length: f64,
    /// Mass [kg].
    pub mass: f64,
    /// Coefficient of restitution e.
    pub restitution: f64,
}

/// Mirrors `world.walls[index]` of its lane: an oriented box.
#[derive(Component, Clone, Copy, Debug, PartialEq, Reflect)]
#[reflect(Component)]
pub struct Wall {
    pub index: usize,
    pub center: DVec2,
    pub half_extents: DVec2,
    /// Radians, counter-clockwise.
    pub angle: f64,
}

/// Kinematic state of a body after the latest fixed step, in lane-local metres (a ball's `angle`/`omega` stay 0).
#[derive(Component, Clone, Copy, Debug, Default, PartialEq, Reflect)]
#[reflect(Component)]
pub struct BodyState {
    pub position: DVec2,
    pub velocity: DVec2,
    pub angle: f64,
    pub omega: f64,
}

/// The state before the latest fixed step, for render interpolation between fixed steps.
#[derive(Component, Clone, Copy, Debug, Default, PartialEq, Reflect)]
#[reflect(Component)]
pub struct PreviousBodyState {
    pub position: DVec2,
    pub angle: f64,
}

/// One step's numbers, kept for the plots.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DiagnosticSample {
    pub step: u64,
    pub time: f64,
    /// Smallest signed surface distance at the end of the step [m] (negative = overlap).
    pub min_gap: Option<f64>,
    pub max_penetration: f64,
    pub newton_iterations: u32,
    pub energy: f64,
    /// Rod impacts during the step.
    pub rod_impacts: usize,
}

/// Per-lane diagnostics with a bounded history (oldest first).
#[derive(Component, Clone, Debug, Default)]
pub struct LaneDiagnostics {
    pub history: VecDeque<DiagnosticSample>,
    /// Steps whose Newton count exceeded twice the median of the history before them (SPEC §4 "spikes"), from the
    /// sixth step on. Counted since the lane was built, not over the history (a step that leaves the history stays
    /// counted), except that a replay's seek counts them again over the history it keeps.
    pub newton_spikes: u32,
}

impl LaneDiagnostics {
    /// Appends a sample, dropping the oldest beyond [`HISTORY_LEN`].
    pub fn push(&mut self, sample: DiagnosticSample) {
        let mut counts: Vec<u32> = self.history.iter().map(|s| s.newton_iterations).collect();
        if counts.len() >= 5 {
            // The median without a full sort: a replay's seek pushes up to twice the history at once.
            let middle = counts.len() / 2;
            let median = *counts.select_nth_unstable(middle).1;
            if sample.newton_iterations > 2 * median.max(1) {
                self.newton_spikes += 1;
            }
        }
        if self.history.len() >= HISTORY_LEN {
            self.history.pop_front();
        }
        self.history.push_back(sample);
    }
}

/// The scene being simulated: where it came from, the file as loaded, and the version the lanes are built from
/// (the loaded one with any throw parameters applied).
#[derive(Resource, Clone, Debug)]
pub struct ActiveScene {
    pub path: PathBuf,
    pub loaded: Scene,
    pub current: Scene,
}

/// The scene files `[` and `]` cycle through.
#[derive(Resource, Clone, Debug, Default)]
pub struct SceneCatalogue {
    pub paths: Vec<PathBuf>,
}

impl SceneCatalogue {
    /// Adds `path` unless an entry names the same file (spelled the same, or resolving to the same file, as an
    /// absolute path to a shipped scene does); returns the entry's path, so a shipped scene opened by its
    /// absolute path is listed once.
    pub fn add(&mut self, path: &std::path::Path) -> PathBuf {
        self.add_in(std::path::Path::new(""), path)
    }

    /// [`SceneCatalogue::add`], with relative paths taken from `root` rather than the working directory.
    ///
    /// Outside the repository a built-in entry (`assets/scenes/…`) names no file, and loads its compiled-in copy.
    /// A file of the same name holding the same text then takes that entry's place, so the window started there
    /// with the shipped scene's absolute path lists it once (it listed it twice), and reads that file's later edits.
    pub fn add_in(&mut self, root: &std::path::Path, path: &std::path::Path) -> PathBuf {
        let resolved = std::fs::canonicalize(root.join(path)).ok();
        let same = |entry: &PathBuf| {
            entry == path
                || resolved.as_ref().is_some_and(|r| {
                    std::fs::canonicalize(root.join(entry)).ok().as_ref() == Some(r)
                })
        };
        if let Some(entry) = self.paths.iter().find(|entry| same(entry)) {
            return entry.clone();
        }
        let text = std::cell::OnceCell::new();
        let stands_for = |entry: &PathBuf| {
            crate::sim::built_in_text(entry).is_some_and(|built_in| {
                !root.join(entry).exists()
                    && entry.file_name() == path.file_name()
                    && text
                        .get_or_init(|| {
                            crate::scene::read_bounded_text(&root.join(path), "scenes").ok()
                        })
                        .as_deref()
                        == Some(built_in)
            })
        };
        if let Some(slot) = self.paths.iter().position(stands_for) {
            self.paths[slot] = path.to_path_buf();
            return path.to_path_buf();
        }
        self.paths.push(path.to_path_buf());
        path.to_path_buf()
    }

    /// The name the scene at `path` gives itself (its `name` field), or the file's stem where the file does not
    /// load, or is a FIFO (read once already, and a second read would wait for a writer). Reads and parses the
    /// file: for when an entry joins the catalogue, not for each frame.
    pub fn name_of(path: &std::path::Path) -> String {
        let loaded = (!crate::demo::is_fifo(path))
            .then(|| ActiveScene::load(path).ok())
            .flatten();
        match loaded {
            Some(active) => active.loaded.name,
            None => path
                .file_stem()
                .map(|stem| stem.to_string_lossy().into_owned())
                .unwrap_or_else(|| path.display().to_string()),
        }
    }
}

/// Run control shared by keys, buttons and tests.
#[derive(Resource, Clone, Debug, Default)]
pub struct SimControl {
    pub paused: bool,
    /// Steps still to take while paused (O adds one).
    pub pending_steps: u32,
    /// The run ends at this time [s] (the scene's `steps` at its smallest h, e.g. 0.8 s for wall throw's 80 steps
    /// of 10 ms; [`crate::demo::run_seconds`]); `None` runs forever.
    pub run_end: Option<f64>,
    /// Ticks that stepped a lane since the last restart (a tick advances the run by its smallest h).
    pub steps_taken: u64,
    /// Pause and single-step requests not yet seen by the recorder.
    pub pace_log: Vec<crate::demo::Action>,
    /// Fixed ticks that stepped (or would have, had the run not reached its end) since the app started;
    /// never reset. Demos time their actions by it.
    pub ticks: u64,
    /// The lanes' play rate the fixed clock was last set to ([`crate::demo::play_rate_hz`]): the clock is set
    /// again only when it changes, so the fixed-rate slider holds through restarts, throws and recordings that
    /// keep the lanes' h.
    pub lanes_hz: Option<f64>,
}

impl SimControl {
    /// Pauses or resumes (P, the Pause button).
    pub fn toggle_pause(&mut self) {
        self.paused = !self.paused;
        self.pace_log.push(if self.paused {
            crate::demo::Action::Pause
        } else {
            crate::demo::Action::Resume
        });
    }

    /// Pauses and asks for one step (O, the Step button).
    pub fn single_step(&mut self) {
        if !self.paused {
            self.paused = true;
            self.pace_log.push(crate::demo::Action::Pause);
        }
        self.pending_steps = self.pending_steps.saturating_add(1);
        self.pace_log.push(crate::demo::Action::SingleStep);
    }
}

/// Readable messages for the UI: refused spawns, rejected edits, failed loads, lane faults. Never a panic.
#[derive(Resource, Clone, Debug, Default)]
pub struct SimLog {
    /// The latest error, shown until replaced or cleared.
    pub error: Option<String>,
    /// The latest informational line.
    pub info: Option<String>,
    /// Every error so far, newest last (bounded).
    pub errors: Vec<String>,
    /// Errors raised so far (`errors` keeps only the last 100).
    pub raised: u64,
    /// What the current error is about, when a later event may answer it ([`SimLog::error_about`]).
    pub topic: Option<ErrorTopic>,
}

/// What an error is about, so that the event that answers it can take it off the screen
/// ([`SimLog::withdraw`]) without touching an unrelated error raised since.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorTopic {
    /// A failed export: a new export under way answers it.
    Export,
    /// A refused edit of `settings` of the lane with index `lane`: a later edit of that lane that applies and
    /// changes one of them answers it. An edit of another of its settings does not: a refused μ stays on screen
    /// when the field loses focus to the d̂ field, whose edit applies a tick later.
    LaneEdit {
        lane: usize,
        settings: Vec<LaneSetting>,
    },
    /// A demo that could not be replayed: a replay that starts answers it.
    Replay,
    /// A refusal owed to what the sandbox was doing then (a replay running, a rod dropped below the floor): a
    /// replay that starts or stops answers it. Such notes outlived their cause on screen.
    Session,
    /// A refused typed value of a run control (time scale, fixed rate): a change of either that applies answers
    /// it.
    RunControl,
    /// A refused "save as" of a recording (a folder, a missing folder, every numbered name taken) or a save that
    /// failed (a FIFO that nothing reads, a full disk): a stop that goes on to save answers it.
    SaveAs,
}

/// One of a lane's contact settings (a field of [`ContactSettings`]), as an edit changes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaneSetting {
    Method,
    Stiffness,
    Dhat,
    Kappa,
    AdaptiveKappa,
    CcdFactor,
    H,
    Gravity,
    NewtonTolerance,
    NewtonMaxIterations,
    Friction,
    FrictionEpsilonV,
    FrictionIterations,
}

impl LaneSetting {
    /// Every setting, in the order of the enum.
    pub const ALL: [LaneSetting; 13] = [
        LaneSetting::Method,
        LaneSetting::Stiffness,
        LaneSetting::Dhat,
        LaneSetting::Kappa,
        LaneSetting::AdaptiveKappa,
        LaneSetting::CcdFactor,
        LaneSetting::H,
        LaneSetting::Gravity,
        LaneSetting::NewtonTolerance,
        LaneSetting::NewtonMaxIterations,
        LaneSetting::Friction,
        LaneSetting::FrictionEpsilonV,
        LaneSetting::FrictionIterations,
    ];

    /// The label of this setting's field in the lane panel.
    pub fn label(self) -> &'static str {
        match self {
            LaneSetting::Method => "method",
            LaneSetting::Friction => "friction μ",
            LaneSetting::Stiffness => "k [N/m]",
            LaneSetting::H => "h [s]",
            LaneSetting::Dhat => "dhat [m]",
            LaneSetting::Gravity => "gravity y",
            LaneSetting::Kappa => "κ",
            LaneSetting::AdaptiveKappa => "adaptive κ",
            LaneSetting::CcdFactor => "CCD factor s",
            LaneSetting::NewtonTolerance => "Newton tol [m]",
            LaneSetting::NewtonMaxIterations => "Newton cap",
            LaneSetting::FrictionEpsilonV => "friction ε_v [m/s]",
            LaneSetting::FrictionIterations => "friction passes",
        }
    }

    /// What the setting does, in a sentence or two: the lane panel's hover text on its label.
    pub fn help(self) -> &'static str {
        match self {
            LaneSetting::Method => {
                "How contact is resolved: penalty (a spring ½ k p² on every overlap p; a fast ball can tunnel) \
                 or ipc (the log barrier of SPEC §1.2 with CCD-clamped steps; nothing ever overlaps)."
            }
            LaneSetting::Friction => {
                "Coulomb friction coefficient μ (IPC's lagged smoothed friction, SPEC §1.5); 0 is frictionless."
            }
            LaneSetting::Stiffness => {
                "Penalty stiffness: the push is k times the overlap depth. A larger k stops a ball shallower, but a \
                 ball that crosses half the wall within one step (v·h) still goes through."
            }
            LaneSetting::H => {
                "The time step. Penalty can tunnel when v·h exceeds half the thinnest wall; IPC's CCD never lets \
                 a ball through, at any h."
            }
            LaneSetting::Dhat => {
                "IPC's contact distance d̂: the barrier acts only on gaps below it, so a ball stops within d̂ of \
                 what it meets. auto: 10⁻³ × the scene's bounding-box diagonal (SPEC §1.4)."
            }
            LaneSetting::Gravity => "Vertical gravity [m/s²]; negative pulls down.",
            LaneSetting::Kappa => {
                "Barrier stiffness κ (B = κ Σ b(d, d̂)): a larger κ stops a ball farther from what it meets, \
                 within d̂."
            }
            LaneSetting::AdaptiveKappa => {
                "Starts κ from the gradient balance and doubles it while a contact keeps closing (SPEC §1.4)."
            }
            LaneSetting::CcdFactor => {
                "IPC's first trial step goes s × the way to the first contact along Newton's direction (0.9: 90 %), \
                 so that every iterate stays free of overlaps."
            }
            LaneSetting::NewtonTolerance => {
                "Newton stops when its direction's largest component is below this many metres."
            }
            LaneSetting::NewtonMaxIterations => {
                "Most Newton directions per step. A step that reaches it keeps its last iterate, free of overlaps \
                 but not converged, and counts in \"caps\"."
            }
            LaneSetting::FrictionEpsilonV => {
                "Friction's smoothing speed ε_v: below it a sliding contact is treated as sticking (SPEC §1.5)."
            }
            LaneSetting::FrictionIterations => {
                "Passes of lagged friction per step: each solves again with the contact forces of the last."
            }
        }
    }

    /// The setting a scene field path names (`contact.newton_max_iterations`, `contact.gravity.y`), as the
    /// scene checks report it.
    pub fn of_field(path: &str) -> Option<LaneSetting> {
        let field = path.strip_prefix("contact.")?;
        let field = field.split('.').next()?;
        Some(match field {
            "method" => LaneSetting::Method,
            "stiffness" => LaneSetting::Stiffness,
            "dhat" => LaneSetting::Dhat,
            "kappa" => LaneSetting::Kappa,
            "adaptive_kappa" => LaneSetting::AdaptiveKappa,
            "ccd_factor" => LaneSetting::CcdFactor,
            "h" => LaneSetting::H,
            "gravity" => LaneSetting::Gravity,
            "newton_tolerance" => LaneSetting::NewtonTolerance,
            "newton_max_iterations" => LaneSetting::NewtonMaxIterations,
            "friction" => LaneSetting::Friction,
            "friction_epsilon_v" => LaneSetting::FrictionEpsilonV,
            "friction_iterations" => LaneSetting::FrictionIterations,
            _ => return None,
        })
    }

    /// This setting's value in `settings`, as a lane's title quotes it after an edit: `k = 1e6 N/m`.
    pub fn value_text(self, settings: &ContactSettings) -> String {
        use crate::text::significant as number;
        match self {
            LaneSetting::Method => format!("method {}", settings.method.label()),
            LaneSetting::Stiffness => format!("k = {} N/m", number(settings.stiffness)),
            LaneSetting::Dhat => match settings.dhat {
                Some(d) => format!("d\u{302} = {} m", number(d)),
                None => "d\u{302} automatic".into(),
            },
            LaneSetting::Kappa => format!("κ = {}", number(settings.kappa)),
            LaneSetting::AdaptiveKappa => format!(
                "adaptive κ {}",
                if settings.adaptive_kappa { "on" } else { "off" }
            ),
            LaneSetting::CcdFactor => format!("CCD factor = {}", number(settings.ccd_factor)),
            LaneSetting::H => format!("h = {} s", number(settings.h)),
            LaneSetting::Gravity => format!(
                "g = ({}, {}) m/s²",
                number(settings.gravity.x),
                number(settings.gravity.y)
            ),
            LaneSetting::NewtonTolerance => {
                format!("Newton tolerance = {} m", number(settings.newton_tolerance))
            }
            LaneSetting::NewtonMaxIterations => {
                format!("Newton cap = {}", settings.newton_max_iterations)
            }
            LaneSetting::Friction => format!("μ = {}", number(settings.friction)),
            LaneSetting::FrictionEpsilonV => {
                format!("ε_v = {} m/s", number(settings.friction_epsilon_v))
            }
            LaneSetting::FrictionIterations => {
                format!("friction passes = {}", settings.friction_iterations)
            }
        }
    }

    /// The settings in which `before` and `after` differ.
    pub fn changed(before: &ContactSettings, after: &ContactSettings) -> Vec<LaneSetting> {
        // Spelled out field by field, so that a new field of `ContactSettings` does not compile until it is named.
        let ContactSettings {
            method,
            stiffness,
            dhat,
            kappa,
            adaptive_kappa,
            ccd_factor,
            h,
            gravity,
            newton_tolerance,
            newton_max_iterations,
            friction,
            friction_epsilon_v,
            friction_iterations,
        } = after;
        [
            (LaneSetting::Method, before.method != *method),
            (LaneSetting::Stiffness, before.stiffness != *stiffness),
            (LaneSetting::Dhat, before.dhat != *dhat),
            (LaneSetting::Kappa, before.kappa != *kappa),
            (
                LaneSetting::AdaptiveKappa,
                before.adaptive_kappa != *adaptive_kappa,
            ),
            (LaneSetting::CcdFactor, before.ccd_factor != *ccd_factor),
            (LaneSetting::H, before.h != *h),
            (LaneSetting::Gravity, before.gravity != *gravity),
            (
                LaneSetting::NewtonTolerance,
                before.newton_tolerance != *newton_tolerance,
            ),
            (
                LaneSetting::NewtonMaxIterations,
                before.newton_max_iterations != *newton_max_iterations,
            ),
            (LaneSetting::Friction, before.friction != *friction),
            (
                LaneSetting::FrictionEpsilonV,
                before.friction_epsilon_v != *friction_epsilon_v,
            ),
            (
                LaneSetting::FrictionIterations,
                before.friction_iterations != *friction_iterations,
            ),
        ]
        .into_iter()
        .filter_map(|(setting, differs)| differs.then_some(setting))
        .collect()
    }
}

impl SimLog {
    pub fn error(&mut self, message: impl Into<String>) {
        let message = message.into();
        warn!("{message}");
        if self.errors.len() >= 100 {
            self.errors.remove(0);
        }
        self.errors.push(message.clone());
        self.error = Some(message);
        self.topic = None;
        self.raised += 1;
    }

    /// An error about `topic`: [`SimLog::withdraw`] with the same topic clears it while it is the one shown.
    pub fn error_about(&mut self, topic: ErrorTopic, message: impl Into<String>) {
        self.error(message);
        self.topic = Some(topic);
    }

    /// Clears the shown error if it is about `topic`.
    pub fn withdraw(&mut self, topic: &ErrorTopic) {
        if self.topic.as_ref() == Some(topic) {
            self.clear_error();
        }
    }

    /// Clears the shown error if it is a refused edit of lane `lane` about one of the settings an applied edit
    /// `changed` ([`ErrorTopic::LaneEdit`]).
    pub fn withdraw_lane_edit(&mut self, lane: usize, changed: &[LaneSetting]) {
        let answered = matches!(
            &self.topic,
            Some(ErrorTopic::LaneEdit { lane: l, settings })
                if *l == lane && settings.iter().any(|s| changed.contains(s))
        );
        if answered {
            self.clear_error();
        }
    }

    /// Takes the shown error off the screen, with what it was about (the history in `errors` keeps it).
    pub fn clear_error(&mut self) {
        self.error = None;
        self.topic = None;
    }

    pub fn info(&mut self, message: impl Into<String>) {
        self.info = Some(message.into());
    }
}
