//! Demos in the ECS (SPEC §5): the [`Recorder`] logs every applied user action with its tick and hashes the
//! lanes every N ticks; a [`Replay`] drives the lanes from a [`Player`] instead of the user.
//!
//! Timing (see [`crate::demo`]): an action applied in `Update` or in `SimSet::Gather` before fixed tick
//! `T + 1` steps is tagged `T`; the hash of tick `T` is taken just before that step, after every action tagged
//! `T`. [`crate::demo::Session`] replays the same order.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bevy::prelude::*;

use super::{
    ActiveScene, DiagnosticSample, ErrorTopic, HISTORY_LEN, Lane, LaneDiagnostics, LaneMember,
    LaneSettings, RestartScene, SimControl, SimLog, build_lanes, drop_surplus_bodies, lane_bounds,
    push_sample, sample, spawn_lane_entities_with_history,
};
use crate::demo::{
    Action, DEFAULT_HASH_EVERY, DEMO_VERSION, Demo, PHYSICS_REVISION, Player, TickHash,
    TimedAction, Verdict, hash_hex, hash_lanes,
};
use crate::physics::DVec2;
use crate::physics::world::LaneWorld;
use crate::scene::Scene;

/// Start recording: the scene restarts and the demo begins at its first tick.
#[derive(Message, Clone, Copy, Debug, Default, PartialEq)]
pub struct StartRecording;

/// Stop recording and save the demo here (atomically), or, when a file is already there, under the first free
/// numbered name beside it (`mine-2.demo.ron`, …): a recording never replaces a file.
#[derive(Message, Clone, Debug, PartialEq)]
pub struct StopRecording(pub PathBuf);

/// Load a demo and replay it in the lanes (user input is disabled until [`StopReplay`]).
#[derive(Message, Clone, Debug, PartialEq)]
pub struct StartReplay(pub PathBuf);

/// Leave the replay and restart the active scene.
#[derive(Message, Clone, Copy, Debug, Default, PartialEq)]
pub struct StopReplay;

/// A demo the window saved: where, and the name its stop asked for (where that was taken, the save went to a
/// numbered name beside it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SavedDemo {
    pub path: PathBuf,
    pub asked: PathBuf,
}

/// The demo being recorded, if any.
#[derive(Resource, Debug)]
pub struct Recorder {
    /// The next rebuild of the lanes starts a recording.
    pub armed: bool,
    pub recording: Option<Recording>,
    /// Store a hash every this many ticks.
    pub hash_every: u64,
    /// The last demo saved.
    pub last_saved: Option<SavedDemo>,
    /// The longest recording, in ticks ([`crate::demo::MAX_TICKS`]; smaller in tests): one kept running past it
    /// ends there, so that what is saved can be replayed.
    pub max_ticks: u64,
    /// The most actions a recording holds ([`crate::demo::MAX_ACTIONS`]; smaller in tests). A recording ends
    /// before the first frame whose actions might not all fit, so that what is saved can be replayed.
    pub max_actions: usize,
    /// The most hashes a recording stores ([`crate::demo::MAX_HASHES`], which a demo may not exceed; smaller in
    /// tests). Once the list is full
    /// no more are stored, except the end's hash, which takes the last place.
    pub max_hashes: usize,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder {
            armed: false,
            recording: None,
            hash_every: DEFAULT_HASH_EVERY,
            last_saved: None,
            max_ticks: crate::demo::MAX_TICKS,
            max_actions: crate::demo::MAX_ACTIONS,
            max_hashes: crate::demo::MAX_HASHES,
        }
    }
}

/// A recording in progress.
#[derive(Clone, Debug)]
pub struct Recording {
    pub demo: Demo,
    /// `SimControl::ticks` when it started.
    pub start_tick: u64,
    /// Set once the recording has reached one of the recorder's limits: the demo ends at that tick, whose hash
    /// is stored, and what happens after it is not recorded.
    pub ended: Option<RecordingEnd>,
    /// Actions that came after the end and were left out.
    pub left_out: u64,
}

/// Where a recording kept running past a limit ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordingEnd {
    /// The demo's last tick.
    pub tick: u64,
    /// The limit it reached.
    pub limit: RecordingLimit,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordingLimit {
    /// [`Recorder::max_ticks`].
    Ticks,
    /// [`Recorder::max_actions`].
    Actions,
}

impl Recorder {
    pub fn is_recording(&self) -> bool {
        self.recording.is_some()
    }

    /// Starts a recording on freshly built lanes of `scene`.
    pub fn begin(&mut self, scene: Scene, fixed_hz: f64, now: u64) {
        self.armed = false;
        self.recording = Some(Recording {
            demo: Demo {
                version: DEMO_VERSION,
                physics: PHYSICS_REVISION,
                written_by: format!("contact-sandbox {} (window)", env!("CARGO_PKG_VERSION")),
                fixed_hz: if fixed_hz.is_finite() && fixed_hz > 0.0 {
                    fixed_hz
                } else {
                    60.0
                },
                hash_every: self.hash_every.max(1),
                ticks: 0,
                scene,
                actions: Vec::new(),
                hashes: Vec::new(),
            },
            start_tick: now,
            ended: None,
            left_out: 0,
        });
    }

    /// Logs an applied action at `SimControl::ticks == now` (nothing when not recording). After the recording's
    /// end, the action is only counted as left out.
    pub fn record(&mut self, now: u64, action: Action) {
        if let Some(r) = &mut self.recording {
            let tick = now.saturating_sub(r.start_tick);
            // The second test is a backstop: `end_unless_room` ends the recording before this can happen.
            if r.ended.is_some() || r.demo.actions.len() >= self.max_actions {
                r.left_out += 1;
                return;
            }
            r.demo.actions.push(TimedAction { tick, action });
        }
    }

    /// Called before up to `coming` actions are applied at `now`: unless they all fit within `max_actions`,
    /// the recording ends here, with `hash` (the lanes' state now, before those actions) as its last hash, and
    /// the actions are left out. A replay then ends in the state the window was in, so it matches. Returns
    /// whether the recording ended.
    pub fn end_unless_room(&mut self, now: u64, coming: usize, hash: impl FnOnce() -> u64) -> bool {
        if self.has_room(coming) {
            return false;
        }
        let Some(r) = &mut self.recording else {
            return false;
        };
        let tick = now.saturating_sub(r.start_tick);
        r.ended = Some(RecordingEnd {
            tick,
            limit: RecordingLimit::Actions,
        });
        r.demo.hashes.retain(|h| h.tick < tick);
        // The last hash must be at the end: a full list gives up its last one for it.
        if r.demo.hashes.len() >= self.max_hashes {
            r.demo.hashes.pop();
        }
        r.demo.hashes.push(TickHash {
            tick,
            hash: hash_hex(hash()),
        });
        true
    }

    /// Do `coming` more actions fit in the recording (always, when none runs or it has ended)?
    pub fn has_room(&self, coming: usize) -> bool {
        self.recording.as_ref().is_none_or(|r| {
            r.ended.is_some() || r.demo.actions.len().saturating_add(coming) <= self.max_actions
        })
    }

    /// The ticks a batch of steps starting at `now` may take (at most `wanted`, at least 1): a recording that
    /// has not ended must see the tick of its `max_ticks` limit, to end there with its hash.
    pub fn ticks_before_limit(&self, now: u64, wanted: u32) -> u32 {
        let Some(r) = self.recording.as_ref().filter(|r| r.ended.is_none()) else {
            return wanted;
        };
        let left = self
            .max_ticks
            .saturating_sub(now.saturating_sub(r.start_tick))
            .max(1);
        u32::try_from(left).map_or(wanted, |left| wanted.min(left))
    }

    /// Ticks recorded so far.
    pub fn ticks(&self, now: u64) -> u64 {
        self.recording.as_ref().map_or(0, |r| {
            let ticks = now.saturating_sub(r.start_tick);
            r.ended.map_or(ticks, |end| ticks.min(end.tick))
        })
    }

    /// Actions recorded so far.
    pub fn actions(&self) -> usize {
        self.recording.as_ref().map_or(0, |r| r.demo.actions.len())
    }
}

/// The state hash of the ECS lanes, taken in lane order as a replay's session takes its lanes.
pub(super) fn hash_of_lanes<'a>(lanes: impl Iterator<Item = &'a Lane>) -> u64 {
    let mut sorted: Vec<&Lane> = lanes.collect();
    sorted.sort_by_key(|l| l.index);
    hash_lanes(sorted.into_iter().map(|l| &l.world))
}

/// FixedUpdate, between Gather and Step: the hash of the tick about to be left, every `hash_every` ticks.
pub fn record_hash(
    control: Res<SimControl>,
    mut recorder: ResMut<Recorder>,
    lanes: Query<&Lane>,
    replay: Option<Res<Replay>>,
) {
    if replay.is_some() || !control.steps_this_tick() {
        return;
    }
    let max_ticks = recorder.max_ticks;
    let max_hashes = recorder.max_hashes;
    let Some(r) = &mut recorder.recording else {
        return;
    };
    let tick = control.ticks.saturating_sub(r.start_tick);
    if r.ended.is_some() {
        return;
    }
    // The last tick a demo may hold: its hash is stored, and the recording ends there.
    if tick >= max_ticks {
        r.ended = Some(RecordingEnd {
            tick,
            limit: RecordingLimit::Ticks,
        });
    }
    if r.ended.is_some() && r.demo.hashes.len() >= max_hashes {
        // The last hash must be at the end: a full list gives up its last one for it.
        r.demo.hashes.pop();
    }
    if (tick.is_multiple_of(r.demo.hash_every) || r.ended.is_some())
        && r.demo.hashes.len() < max_hashes
    {
        let hash = hash_of_lanes(lanes.iter());
        r.demo.hashes.push(TickHash {
            tick,
            hash: hash_hex(hash),
        });
    }
}

/// Update, before the other messages: pause and single-step requests are logged (they do not change the
/// physics, but a viewer shows them); Start/StopRecording arm or finish the recorder.
#[allow(clippy::too_many_arguments)]
pub fn recording_messages(
    mut starts: MessageReader<StartRecording>,
    mut stops: MessageReader<StopRecording>,
    mut restarts: MessageWriter<RestartScene>,
    mut control: ResMut<SimControl>,
    mut recorder: ResMut<Recorder>,
    mut log: ResMut<SimLog>,
    lanes: Query<&Lane>,
    replay: Option<Res<Replay>>,
) {
    let now = control.ticks;
    for action in std::mem::take(&mut control.pace_log) {
        recorder.record(now, action);
    }
    for stop in stops.read() {
        let Some(mut r) = recorder.recording.take() else {
            log.error("not recording; nothing to save");
            continue;
        };
        let tick = now.saturating_sub(r.start_tick);
        let tick = r.ended.map_or(tick, |end| tick.min(end.tick));
        r.demo.ticks = tick;
        // The end's hash, taken back if the save fails: the recording goes on, and a hash off the `hash_every`
        // grid before its end would make the demo saved later unreadable.
        let end_hash = r.ended.is_none() && r.demo.hashes.last().is_none_or(|h| h.tick < tick);
        if end_hash {
            r.demo.hashes.push(TickHash {
                tick,
                hash: hash_hex(hash_of_lanes(lanes.iter())),
            });
        }
        match save_without_replacing(&r.demo, &stop.0) {
            Ok(saved) => {
                let mut kept = if saved == stop.0 {
                    String::new()
                } else {
                    format!("; {} already exists and was kept", stop.0.display())
                };
                match r.ended.map(|end| end.limit) {
                    Some(RecordingLimit::Ticks) => kept.push_str(&format!(
                        "; the recording ended at its limit of {} ticks (actions after it, left out: {})",
                        r.demo.ticks, r.left_out
                    )),
                    Some(RecordingLimit::Actions) => kept.push_str(&format!(
                        "; the recording ended at tick {}, before the actions that would have passed its limit \
                         of {} (left out: {})",
                        r.demo.ticks,
                        recorder.max_actions,
                        r.left_out
                    )),
                    None => {}
                }
                if tick == 0 {
                    // Recorded while paused throughout (or stopped before the first step): a file, but a
                    // replay of nothing.
                    kept.push_str(if control.paused {
                        "; it holds no step: the sandbox was paused throughout (P resumes while recording)"
                    } else {
                        "; it holds no step"
                    });
                }
                log.info(format!(
                    "saved {} ({}, {}){kept}",
                    saved.display(),
                    crate::text::counted(tick, "tick", "ticks"),
                    crate::text::counted(r.demo.actions.len() as u64, "action", "actions")
                ));
                recorder.last_saved = Some(SavedDemo {
                    path: saved,
                    asked: stop.0.clone(),
                });
                // An earlier save that failed is answered.
                log.withdraw(&ErrorTopic::SaveAs);
            }
            Err(e) => {
                // Keep the recording so nothing is lost: the user can save it elsewhere.
                log.error_about(
                    ErrorTopic::SaveAs,
                    format!("{e:#}; the recording is kept: save it again, or elsewhere"),
                );
                if end_hash {
                    r.demo.hashes.pop();
                }
                recorder.recording = Some(r);
            }
        }
    }
    if starts.read().count() > 0 {
        if replay.is_some() {
            log.error_about(
                ErrorTopic::Session,
                "a demo is replaying: stop the replay before recording",
            );
        } else if recorder.is_recording() {
            log.error("already recording");
        } else {
            recorder.armed = true;
            restarts.write(RestartScene);
        }
    }
}

/// Saves `demo` at `path`, or where a file is there already at the first free numbered name beside it
/// ([`crate::demo::numbered_path`]); returns where it went. Each name is taken with [`Demo::save_new_at_once`], so a
/// file that appears meanwhile is not replaced either, and a FIFO that no program reads is refused, not waited for.
pub fn save_without_replacing(demo: &Demo, path: &std::path::Path) -> anyhow::Result<PathBuf> {
    use crate::demo::{AlreadyExists, MAX_NUMBERED_NAMES, numbered_path};
    for n in 1..=MAX_NUMBERED_NAMES {
        let candidate = if n == 1 {
            path.to_path_buf()
        } else {
            numbered_path(path, n)
        };
        match demo.save_new_at_once(&candidate) {
            Ok(_) => return Ok(candidate),
            Err(e) if e.downcast_ref::<AlreadyExists>().is_some() => {}
            Err(e) => return Err(e),
        }
    }
    anyhow::bail!(
        "{}: not saved: it and {MAX_NUMBERED_NAMES} numbered names beside it are taken",
        path.display()
    )
}

/// A demo being replayed in the lanes: the GUI's replay viewer and the exporter drive the lanes through it.
#[derive(Resource)]
pub struct Replay {
    pub player: Player,
    /// Advance with the fixed clock?
    pub playing: bool,
    /// Demo ticks per fixed tick (0.25 to 8).
    pub speed: f64,
    /// Jump to this tick at the next `Update`.
    pub seek: Option<u64>,
    /// A demo that could not be replayed further (a refused action): the replay stops here.
    pub error: Option<String>,
    /// The whole demo checked once in the background: `None` while it runs.
    pub full_check: Arc<Mutex<Option<Result<Verdict, String>>>>,
    accumulator: f64,
    synced_generation: Option<u64>,
    /// The lanes' play rate last set on the fixed clock ([`set_play_rate`]): it is set again only when the lanes'
    /// rate changes, so the fixed-rate slider holds until then.
    play_hz: Option<f64>,
    /// The sandbox as it was when the replay started, restored when it stops.
    before: Option<SandboxSnapshot>,
}

/// The lanes, their plots and the run control at the start of a replay.
struct SandboxSnapshot {
    worlds: Vec<LaneWorld>,
    /// The lanes' bounds as their run was built (the layout on screen).
    layout: Vec<(DVec2, DVec2)>,
    histories: Vec<LaneDiagnostics>,
    run_end: Option<f64>,
    paused: bool,
    timestep: std::time::Duration,
}

impl Replay {
    /// Starts replaying at tick 0 and verifies the whole demo on a background thread.
    pub fn new(player: Player) -> Replay {
        let full_check = Arc::new(Mutex::new(None));
        let mut checker = player.clone();
        let slot = Arc::clone(&full_check);
        std::thread::spawn(move || {
            let result = checker.run_to_end(true).cloned().map_err(|e| e.to_string());
            if let Ok(mut slot) = slot.lock() {
                *slot = Some(result);
            }
        });
        Replay {
            player,
            playing: true,
            speed: 1.0,
            seek: None,
            error: None,
            full_check,
            accumulator: 0.0,
            synced_generation: None,
            play_hz: None,
            before: None,
        }
    }

    /// Starts replaying without the background check (the exporter checks as it goes).
    pub fn without_check(player: Player) -> Replay {
        Replay {
            player,
            playing: false,
            speed: 1.0,
            seek: None,
            error: None,
            full_check: Arc::new(Mutex::new(None)),
            accumulator: 0.0,
            synced_generation: None,
            play_hz: None,
            before: None,
        }
    }

    /// The badge: "match", "MISMATCH at tick T", "nothing checked" (a demo without hashes), or "checking…".
    pub fn badge(&self) -> String {
        if let Some((tick, _, _)) = &self.player.verdict.mismatch {
            return format!("MISMATCH at tick {tick}");
        }
        match self.full_check.lock().ok().and_then(|s| s.clone()) {
            Some(Ok(v)) => match v.mismatch {
                Some((tick, _, _)) => format!("MISMATCH at tick {tick}"),
                None => v.to_string(),
            },
            Some(Err(e)) => format!("cannot replay: {e}"),
            None => format!(
                "checking… ({} so far)",
                crate::text::counted(
                    self.player.verdict.matched as u64,
                    "hash matches",
                    "hashes match"
                )
            ),
        }
    }
}

/// Update: StartReplay / StopReplay, and seeks.
#[allow(clippy::too_many_arguments)]
pub fn replay_messages(
    mut commands: Commands,
    mut starts: MessageReader<StartReplay>,
    mut stops: MessageReader<StopReplay>,
    replay: Option<ResMut<Replay>>,
    mut recorder: ResMut<Recorder>,
    mut log: ResMut<SimLog>,
    mut control: ResMut<SimControl>,
    lanes: Query<(Entity, &Lane, &LaneDiagnostics)>,
    members: Query<Entity, With<LaneMember>>,
    active: Option<Res<ActiveScene>>,
    mut fixed: ResMut<Time<Fixed>>,
) {
    let mut replay = replay;
    if stops.read().count() > 0
        && let Some(replay) = replay.as_deref_mut()
    {
        commands.remove_resource::<Replay>();
        for entity in lanes.iter().map(|(e, ..)| e).chain(members.iter()) {
            commands.entity(entity).despawn();
        }
        if let Some(before) = replay.before.take() {
            // Back to the sandbox as it was: its lanes, edits, plots and run control.
            control.run_end = before.run_end;
            control.paused = before.paused;
            fixed.set_timestep(before.timestep);
            spawn_lane_entities_with_history(
                &mut commands,
                before.worlds,
                before.histories,
                Some(before.layout),
            );
            log.info("replay stopped; the sandbox is back as it was");
            log.withdraw(&ErrorTopic::Session);
        } else if let Some(active) = active {
            build_lanes(&mut commands, &active.current, &mut control, &mut fixed);
            log.info("replay stopped; the scene restarted");
            log.withdraw(&ErrorTopic::Session);
        }
        return;
    }
    if let Some(start) = starts.read().last() {
        if recorder.is_recording() {
            log.error_about(
                ErrorTopic::Session,
                "recording: stop the recording before replaying a demo",
            );
            return;
        }
        recorder.armed = false;
        // Opening a FIFO waits for something to write into it, and this runs in the window's frame.
        if crate::demo::is_fifo(&start.0) {
            log.error_about(
                ErrorTopic::Replay,
                format!(
                    "{}: a FIFO; the window replays demo files, and would stop until something wrote into it \
                     (in a terminal, `contact-sandbox replay` reads a FIFO)",
                    start.0.display()
                ),
            );
            return;
        }
        match Demo::load(&start.0) {
            Ok(demo) => {
                let mut player = Player::new(demo, start.0.display().to_string());
                match player.start() {
                    Ok(()) => {
                        let mut sorted: Vec<(&Lane, &LaneDiagnostics)> =
                            lanes.iter().map(|(_, lane, d)| (lane, d)).collect();
                        sorted.sort_by_key(|(lane, _)| lane.index);
                        // A replay started over another keeps the sandbox from before the first.
                        let earlier = replay.as_deref_mut().and_then(|r| r.before.take());
                        let before = earlier.unwrap_or_else(|| SandboxSnapshot {
                            worlds: sorted.iter().map(|(lane, _)| lane.world.clone()).collect(),
                            layout: sorted.iter().map(|(lane, _)| lane.bounds).collect(),
                            histories: sorted.iter().map(|(_, d)| (*d).clone()).collect(),
                            run_end: control.run_end,
                            paused: control.paused,
                            timestep: fixed.timestep(),
                        });
                        control.paused = false;
                        control.run_end = None;
                        let mut replay = Replay::new(player);
                        replay.before = Some(before);
                        commands.insert_resource(replay);
                        log.withdraw(&ErrorTopic::Session);
                        // A demo that could not be opened before is answered by this one.
                        log.withdraw(&ErrorTopic::Replay);
                        log.info(format!("replaying {}", start.0.display()));
                    }
                    Err(e) => log.error_about(ErrorTopic::Replay, e.to_string()),
                }
            }
            Err(e) => log.error_about(ErrorTopic::Replay, e.to_string()),
        }
    }
}

/// Brings the ECS lanes to the player's state: rebuilt when the player rebuilt its lanes (or after a seek),
/// copied in place otherwise.
fn sync_lanes(
    commands: &mut Commands,
    replay: &mut Replay,
    lanes: &mut Query<(Entity, &mut Lane, &mut LaneSettings, &mut LaneDiagnostics)>,
    members: &Query<Entity, With<LaneMember>>,
    fixed: &mut Time<Fixed>,
    histories: Vec<LaneDiagnostics>,
) {
    // After every tick and seek: the rate the next tick plays at.
    set_play_rate(fixed, replay);
    let session = &replay.player.session;
    if replay.synced_generation != Some(session.generation) {
        for (entity, ..) in lanes.iter() {
            commands.entity(entity).despawn();
        }
        for entity in members {
            commands.entity(entity).despawn();
        }
        // Laid out as the run on screen was built (its scene), not by where its balls are at this tick.
        let layout = session.scene.build().iter().map(lane_bounds).collect();
        spawn_lane_entities_with_history(commands, session.lanes.clone(), histories, Some(layout));
        replay.synced_generation = Some(session.generation);
        return;
    }
    for (_, mut lane, mut settings, _) in lanes.iter_mut() {
        if let Some(world) = session.lanes.get(lane.index) {
            lane.world.clone_from(world);
            // Fewer bodies than shown after a seek back to before a spawn.
            drop_surplus_bodies(commands, &mut lane);
            if settings.0 != world.settings {
                settings.0 = world.settings.clone();
            }
        }
    }
}

/// The plots after a seek: the samples of the ticks the seek stepped through in the lanes' final generation
/// (`stepped`, oldest first, one per lane per tick) follow what `before` held up to the first of them. A seek
/// within the run on screen keeps the plots up to that point; one into another run (past a throw or a restart)
/// starts them afresh.
fn history_after_seek(
    before: Option<&LaneDiagnostics>,
    stepped: &[Option<DiagnosticSample>],
    now_steps: u64,
) -> LaneDiagnostics {
    let first_new = stepped
        .iter()
        .flatten()
        .map(|s| s.step)
        .next()
        .unwrap_or(now_steps + 1);
    let mut history = LaneDiagnostics::default();
    let kept = before
        .into_iter()
        .flat_map(|d| d.history.iter())
        .filter(|s| s.step < first_new);
    for sample in kept.chain(stepped.iter().flatten()).copied() {
        if history
            .history
            .back()
            .is_none_or(|last| last.step < sample.step)
        {
            history.push(sample);
        }
    }
    history
}

/// Update: applies a pending seek.
pub fn seek_replay(
    mut commands: Commands,
    replay: Option<ResMut<Replay>>,
    mut lanes: Query<(Entity, &mut Lane, &mut LaneSettings, &mut LaneDiagnostics)>,
    members: Query<Entity, With<LaneMember>>,
    mut fixed: ResMut<Time<Fixed>>,
    mut log: ResMut<SimLog>,
) {
    let Some(mut replay) = replay else {
        return;
    };
    let replay = &mut *replay;
    let first_sync = replay.synced_generation.is_none();
    let Some(tick) = replay.seek.take() else {
        if first_sync {
            sync_lanes(
                &mut commands,
                replay,
                &mut lanes,
                &members,
                &mut fixed,
                Vec::new(),
            );
        }
        return;
    };
    // The samples of the steps the seek steps through, per lane (one a step: a lane of 10 ms beside one of 1 ms
    // waits nine ticks of ten), of the lanes' last generation.
    let mut stepped: Vec<VecDeque<DiagnosticSample>> = Vec::new();
    let mut stepped_generation = None;
    let seeking = replay.player.seek_with(tick, |session| {
        if stepped_generation != Some(session.generation) {
            stepped = vec![VecDeque::new(); session.lanes.len()];
            stepped_generation = Some(session.generation);
        }
        for (lane, out) in session.lanes.iter().zip(stepped.iter_mut()) {
            if let Some(sample) = sample(lane)
                && out.back().is_none_or(|last| last.step < sample.step)
            {
                if out.len() >= HISTORY_LEN {
                    out.pop_front();
                }
                out.push_back(sample);
            }
        }
    });
    if let Err(e) = seeking {
        log.error(e.to_string());
        replay.error = Some(e.to_string());
        replay.playing = false;
    }
    let session = &replay.player.session;
    let generation = session.generation;
    let same_run = replay.synced_generation == Some(generation);
    let mut histories = Vec::with_capacity(session.lanes.len());
    for (index, world) in session.lanes.iter().enumerate() {
        let lane_samples: Vec<Option<DiagnosticSample>> = stepped
            .get(index)
            .filter(|_| stepped_generation == Some(generation))
            .into_iter()
            .flatten()
            .copied()
            .map(Some)
            .collect();
        let before = lanes
            .iter()
            .find(|(_, lane, ..)| lane.index == index)
            .map(|(.., diagnostics)| diagnostics)
            .filter(|_| same_run);
        histories.push(history_after_seek(before, &lane_samples, world.stats.steps));
    }
    if same_run {
        for (_, lane, _, mut diagnostics) in lanes.iter_mut() {
            if let Some(history) = histories.get_mut(lane.index) {
                *diagnostics = std::mem::take(history);
            }
        }
    }
    // Another run: the lanes are rebuilt, with the plots of the ticks the seek stepped through.
    sync_lanes(
        &mut commands,
        replay,
        &mut lanes,
        &members,
        &mut fixed,
        histories,
    );
}

/// FixedUpdate (Step): advances the player by `speed` ticks per fixed tick while playing.
pub fn drive_replay(
    mut commands: Commands,
    replay: Option<ResMut<Replay>>,
    mut lanes: Query<(Entity, &mut Lane, &mut LaneSettings, &mut LaneDiagnostics)>,
    members: Query<Entity, With<LaneMember>>,
    mut fixed: ResMut<Time<Fixed>>,
    mut log: ResMut<SimLog>,
) {
    let Some(mut replay) = replay else {
        return;
    };
    let replay = &mut *replay;
    if !replay.playing || replay.error.is_some() {
        return;
    }
    replay.accumulator += replay.speed.clamp(0.0, 64.0);
    let mut advanced = false;
    while replay.accumulator >= 1.0 {
        replay.accumulator -= 1.0;
        // A lane's history takes a sample for each step it takes, as in the sandbox: not on a tick where it
        // waits for a lane of a smaller h, nor after the run's end (a lane of 50 ms beside one of 1 ms counted
        // each of its spikes fifty times, and the idle ticks pushed the run's start out of the plots).
        let session = &replay.player.session;
        let before: Vec<u64> = session.lanes.iter().map(|l| l.stats.steps).collect();
        let generation = session.generation;
        match replay.player.advance() {
            Ok(true) => {
                advanced = true;
                let session = &replay.player.session;
                for (_, lane, _, mut diagnostics) in lanes.iter_mut() {
                    let Some(world) = session.lanes.get(lane.index) else {
                        continue;
                    };
                    let stepped = session.generation != generation
                        || before.get(lane.index) != Some(&world.stats.steps);
                    if stepped {
                        push_sample(world, &mut diagnostics);
                    }
                }
            }
            Ok(false) => {
                replay.playing = false;
                replay.accumulator = 0.0;
                break;
            }
            Err(e) => {
                log.error(e.to_string());
                replay.error = Some(e.to_string());
                replay.playing = false;
                break;
            }
        }
    }
    if advanced {
        sync_lanes(
            &mut commands,
            replay,
            &mut lanes,
            &members,
            &mut fixed,
            Vec::new(),
        );
    }
}

/// The fixed clock at the rate the replay's next tick plays at ([`crate::demo::play_rate_hz`]), as an export
/// plays it: a demo whose lanes were edited or thrown to another h part-way plays at the lanes' speed throughout,
/// not at the rate it began at. Set only when the lanes' rate changes (after a tick or a seek), so the fixed-rate
/// slider holds until then.
fn set_play_rate(fixed: &mut Time<Fixed>, replay: &mut Replay) {
    let hz = replay
        .player
        .session
        .play_rate_hz(replay.player.demo.fixed_hz);
    if replay.play_hz != Some(hz) {
        replay.play_hz = Some(hz);
        fixed.set_timestep_hz(hz);
    }
}
