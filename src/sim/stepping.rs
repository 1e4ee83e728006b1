//! Where the lanes' steps run: inline in the fixed tick (tests, headless runs, export), or on a worker thread
//! while the window keeps drawing ([`Stepping::Background`], the sandbox window).
//!
//! In the background, a fixed tick hands the lanes' next steps to a worker thread (on copies of the lanes) and
//! returns; the window goes on showing the last finished step. A later tick collects the result and starts the
//! next batch. A step slower than a frame (a 2 000-ball pile landing) then slows the simulation, not the window:
//! panning, the panels and the buttons keep the display's rate, and the step counter shows the real-time
//! factor. The ticks that pass while a batch runs are owed: the next batch takes them too, as many as fit in
//! one frame at the last measured cost per step, so a cheap scene still keeps up with real time when frames are
//! slow (as inline stepping catches up with several ticks per frame); those that do not fit are dropped, as a
//! slow step's are.
//!
//! The physics does not change: the worker runs the same [`crate::demo::step_lanes`] on the same state, one
//! tick at a time, and hands back every step's diagnostics sample and the recorder's tick hashes, so the lanes,
//! the plots and a recording are the same as inline. Everything that changes a lane waits for the batch in
//! flight first: messages (spawns, throws, restarts, scene loads, recording and replay controls) settle it
//! before they apply, and settings edits, the recorder's tick hashes and a new batch only run when no batch is
//! in flight. Demos therefore time actions by finished steps, exactly as inline.

use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bevy::prelude::*;

use super::{
    CycleScene, DiagnosticSample, Lane, LaneDiagnostics, LoadScene, Recorder, RestartScene,
    SimControl, SimLog, SpawnBall, SpawnRod, StartRecording, StartReplay, StopRecording,
    StopReplay, ThrowBall,
};
use crate::demo::{MAX_HASHES, TickHash, hash_hex, hash_lanes};
use crate::physics::world::LaneWorld;

/// How `FixedUpdate` steps the lanes.
#[derive(Resource, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Stepping {
    /// Every fixed tick steps the lanes before the frame goes on.
    #[default]
    Inline,
    /// A fixed tick starts the next steps on a worker thread, unless a batch is still running; the window shows
    /// the last finished step.
    Background,
}

/// At most this many ticks in one background batch (and owed while one runs).
pub const MAX_BATCH: u32 = 16;

/// The longest the window spends moving from one finished state to the next (after a pause, the first step
/// still arrives quickly).
pub const MAX_INTERPOLATION: Duration = Duration::from_millis(500);

/// The batch running on the worker thread, if any, and what sizes the next one.
#[derive(Resource, Default)]
pub struct StepInFlight {
    running: Option<Running>,
    /// Fixed ticks that passed while a batch ran, still to be stepped.
    owed: u32,
    /// Wall-clock time per step of the last finished batch.
    pub last_step: Option<Duration>,
    /// Batches started, and the most ticks one took.
    pub batches: u64,
    pub largest_batch: u32,
    /// Batches cut short so as not to step past the end of the recording.
    pub cut_at_recording_limit: u64,
    /// Batches collected so far.
    pub collected: u64,
    /// When the last two batches were collected (real time since start-up): the window interpolates between the
    /// last two finished states over the time between them.
    arrivals: [Option<Duration>; 2],
}

impl StepInFlight {
    /// Is a batch running on the worker thread?
    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// Counts `ticks` more as owed, as if they had passed while a batch ran: the next batch takes them too, as
    /// many as fit in a frame. What a worker slower than the frame leaves behind, on demand (tests of batching).
    pub fn owe(&mut self, ticks: u32) {
        self.owed = (self.owed + ticks).min(MAX_BATCH);
    }

    /// Is the worker thread still stepping? A batch that has finished but is not yet collected is not.
    pub fn worker_busy(&self) -> bool {
        self.running
            .as_ref()
            .is_some_and(|running| !running.handle.is_finished())
    }

    /// How far the display is from the state before the last collected batch (0) to the state after it (1), at
    /// real time `now`: the time since that batch arrived over the time between the last two arrivals (at most
    /// [`MAX_INTERPOLATION`]), so a slow-motion landing moves smoothly instead of jumping once per step. `None`
    /// before two batches arrived.
    pub fn display_fraction(&self, now: Duration) -> Option<f64> {
        let [Some(previous), Some(last)] = self.arrivals else {
            return None;
        };
        let interval = last.saturating_sub(previous).min(MAX_INTERPOLATION);
        if interval.is_zero() {
            return Some(1.0);
        }
        Some((now.saturating_sub(last).as_secs_f64() / interval.as_secs_f64()).clamp(0.0, 1.0))
    }

    /// Ticks the next batch takes: the current one and those owed, as many as fit in `frame` at the last cost
    /// per step (at least one, at most [`MAX_BATCH`]).
    fn batch(&self, frame: Duration) -> u32 {
        let fit = match self.last_step {
            Some(step) if step > Duration::ZERO => {
                (frame.as_secs_f64() / step.as_secs_f64()).floor() as u32
            }
            _ => 1,
        };
        (1 + self.owed).min(fit.max(1)).min(MAX_BATCH)
    }
}

/// The lanes, in the order handed to the worker, with what the bookkeeping after the batch needs.
struct Running {
    handle: JoinHandle<BatchResult>,
    lanes: Vec<Entity>,
    had_fault: Vec<bool>,
}

/// What the worker hands back.
struct BatchResult {
    worlds: Vec<LaneWorld>,
    /// Per lane, the diagnostics sample of every step it took.
    samples: Vec<Vec<DiagnosticSample>>,
    /// Ticks in which some lane stepped.
    stepped: u64,
    /// `(tick relative to the recording's start, hash)` for the recorder.
    hashes: Vec<(u64, u64)>,
    /// Time the worker spent per tick (not counting the wait until the result is collected).
    per_tick: Duration,
}

/// What a batch needs to know about the recorder: hash the state before each tick `t` with
/// `(t − start) % every == 0`, up to `room` hashes.
#[derive(Clone, Copy, Debug)]
struct HashPlan {
    start: u64,
    every: u64,
    room: usize,
}

impl HashPlan {
    /// The plan for the current recording, if any (none once it has ended).
    fn of(recorder: &Recorder) -> Option<HashPlan> {
        recorder
            .recording
            .as_ref()
            .filter(|r| r.ended.is_none())
            .map(|r| HashPlan {
                start: r.start_tick,
                every: r.demo.hash_every.max(1),
                room: MAX_HASHES.saturating_sub(r.demo.hashes.len()),
            })
    }
}

/// Run condition: no batch is running on the worker thread.
pub fn no_step_in_flight(in_flight: Option<Res<StepInFlight>>) -> bool {
    in_flight.is_none_or(|f| !f.is_running())
}

/// Starts a batch of `ticks` steps of `lanes` (scene order) on a worker thread; `first_tick` is
/// `SimControl::ticks` before the first of them. The state before `first_tick` was hashed by
/// [`super::record_hash`] already; the worker hashes the later ticks the plan asks for. Returns `false` (and
/// starts nothing) when the thread cannot be created; the caller then steps inline.
fn start(
    in_flight: &mut StepInFlight,
    lanes: &[(Entity, &LaneWorld)],
    ticks: u32,
    first_tick: u64,
    run_end: Option<f64>,
    plan: Option<HashPlan>,
) -> bool {
    let worlds: Vec<LaneWorld> = lanes.iter().map(|(_, w)| (*w).clone()).collect();
    let spawned = std::thread::Builder::new()
        .name("physics step".into())
        .spawn(move || run_batch(worlds, ticks, first_tick, run_end, plan));
    let Ok(handle) = spawned else {
        return false;
    };
    in_flight.running = Some(Running {
        handle,
        lanes: lanes.iter().map(|(e, _)| *e).collect(),
        had_fault: lanes.iter().map(|(_, w)| w.fault.is_some()).collect(),
    });
    true
}

/// The worker: `ticks` ticks of [`crate::demo::step_lanes`], exactly as that many inline ticks.
fn run_batch(
    mut worlds: Vec<LaneWorld>,
    ticks: u32,
    first_tick: u64,
    run_end: Option<f64>,
    plan: Option<HashPlan>,
) -> BatchResult {
    let started = Instant::now();
    let mut samples = vec![Vec::new(); worlds.len()];
    let mut stepped = 0;
    let mut hashes = Vec::new();
    for k in 0..u64::from(ticks) {
        let tick = first_tick + k;
        if k > 0
            && let Some(plan) = plan
            && let Some(relative) = tick.checked_sub(plan.start)
            && relative.is_multiple_of(plan.every)
            && hashes.len() < plan.room
        {
            hashes.push((relative, hash_lanes(worlds.iter())));
        }
        let before: Vec<u64> = worlds.iter().map(|w| w.stats.steps).collect();
        let any = {
            let mut refs: Vec<&mut LaneWorld> = worlds.iter_mut().collect();
            crate::demo::step_lanes(&mut refs, run_end)
        };
        if any {
            stepped += 1;
        }
        for ((world, before), out) in worlds.iter().zip(before).zip(&mut samples) {
            if world.stats.steps > before
                && let Some(sample) = super::sample(world)
            {
                out.push(sample);
            }
        }
    }
    BatchResult {
        worlds,
        samples,
        stepped,
        hashes,
        per_tick: started.elapsed() / ticks.max(1),
    }
}

/// The resources a finished batch updates.
#[derive(bevy::ecs::system::SystemParam)]
pub struct Bookkeeping<'w, 's> {
    lanes: Query<'w, 's, (Entity, &'static mut Lane, &'static mut LaneDiagnostics)>,
    control: ResMut<'w, SimControl>,
    log: ResMut<'w, SimLog>,
    recorder: ResMut<'w, Recorder>,
    real: Res<'w, Time<Real>>,
}

/// Puts a finished batch's lanes in place and does the bookkeeping of that many inline ticks (diagnostics
/// samples, newly faulted lanes, the step counter, the recorder's hashes). With `wait`, blocks until the batch
/// in flight finishes; without, a batch still running is left alone.
fn collect(in_flight: &mut StepInFlight, b: &mut Bookkeeping, wait: bool) {
    let Some(running) = &in_flight.running else {
        return;
    };
    if !wait && !running.handle.is_finished() {
        return;
    }
    let Some(running) = in_flight.running.take() else {
        return;
    };
    let result = match running.handle.join() {
        Ok(result) => result,
        Err(panic) => {
            let reason = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            let message =
                format!("the physics step panicked ({reason}); the lanes keep their last state");
            for &entity in &running.lanes {
                if let Ok((_, mut lane, _)) = b.lanes.get_mut(entity) {
                    lane.world.fault.get_or_insert_with(|| message.clone());
                }
            }
            b.log.error(message);
            return;
        }
    };
    let BatchResult {
        worlds,
        samples,
        stepped,
        hashes,
        per_tick,
    } = result;
    in_flight.last_step = Some(per_tick);
    in_flight.collected += 1;
    in_flight.arrivals = [in_flight.arrivals[1], Some(b.real.elapsed())];
    for (k, ((world, samples), &entity)) in worlds
        .into_iter()
        .zip(samples)
        .zip(&running.lanes)
        .enumerate()
    {
        // Lanes only go away through messages, which settle the batch first; a missing one is skipped.
        let Ok((_, mut lane, mut diagnostics)) = b.lanes.get_mut(entity) else {
            continue;
        };
        lane.world = world;
        for sample in samples {
            diagnostics.push(sample);
        }
        if !running.had_fault[k]
            && let Some(fault) = &lane.world.fault
        {
            b.log.error(format!("lane '{}': {fault}", lane.world.name));
        }
    }
    b.control.steps_taken += stepped;
    if let Some(recording) = &mut b.recorder.recording {
        recording
            .demo
            .hashes
            .extend(hashes.into_iter().map(|(tick, hash)| TickHash {
                tick,
                hash: hash_hex(hash),
            }));
    }
}

/// FixedUpdate, first in Gather: takes a finished background batch.
pub fn collect_finished_step(in_flight: Option<ResMut<StepInFlight>>, mut b: Bookkeeping) {
    if let Some(mut in_flight) = in_flight {
        collect(&mut in_flight, &mut b, false);
    }
}

/// Before the fixed loop: while paused, a step asked for (O, the Step button, read in `Update`) runs in the next
/// frame's fixed loop, and a paused step the worker has finished is collected in it, instead of waiting for the
/// next tick of a clock that the time scale or the fixed rate may have slowed to one a second or less. Paused
/// ticks do not count ([`SimControl::ticks`]), so a demo's actions keep their ticks.
pub fn step_when_asked(
    control: Res<SimControl>,
    in_flight: Option<Res<StepInFlight>>,
    mut fixed: ResMut<Time<Fixed>>,
) {
    if !control.paused {
        return;
    }
    let finished = in_flight.is_some_and(|f| f.is_running() && !f.worker_busy());
    if control.pending_steps > 0 || finished {
        let short = fixed.timestep().saturating_sub(fixed.overstep());
        fixed.accumulate_overstep(short);
    }
}

/// What [`super::step_lanes`] needs to step in the background.
#[derive(bevy::ecs::system::SystemParam)]
pub struct Background<'w> {
    stepping: Option<Res<'w, Stepping>>,
    in_flight: Option<ResMut<'w, StepInFlight>>,
    recorder: Res<'w, Recorder>,
    real: Res<'w, Time<Real>>,
}

impl Background<'_> {
    /// Is a batch running on the worker thread?
    pub(super) fn is_running(&self) -> bool {
        self.in_flight.as_ref().is_some_and(|f| f.is_running())
    }

    /// Step (background): counts a tick owed while a batch runs, or starts the next batch (the tick and those
    /// owed that fit in a frame). Returns whether the tick was handled; otherwise (inline stepping, or no
    /// thread) the caller steps inline.
    pub(super) fn step(
        &mut self,
        lanes: &[(Entity, &LaneWorld)],
        control: &mut SimControl,
    ) -> bool {
        let Some(in_flight) = self.in_flight.as_deref_mut() else {
            return false;
        };
        if self.stepping.as_deref() != Some(&Stepping::Background) {
            // Switched to inline with a batch still running: its result comes first (collected next tick).
            return in_flight.is_running();
        }
        if in_flight.is_running() {
            if !control.paused {
                in_flight.owed = (in_flight.owed + 1).min(MAX_BATCH);
            }
            return true;
        }
        let first_tick = control.ticks;
        let ticks = if control.paused {
            1
        } else {
            let wanted = in_flight.batch(self.real.delta());
            let ticks = self.recorder.ticks_before_limit(first_tick, wanted);
            if ticks < wanted {
                in_flight.cut_at_recording_limit += 1;
            }
            ticks
        };
        let plan = HashPlan::of(&self.recorder);
        if !start(in_flight, lanes, ticks, first_tick, control.run_end, plan) {
            return false;
        }
        // Ticks that did not fit stay in slow motion: no debt builds up to be fast-forwarded later.
        in_flight.owed = 0;
        in_flight.batches += 1;
        in_flight.largest_batch = in_flight.largest_batch.max(ticks);
        if control.paused {
            control.pending_steps -= 1;
        }
        control.ticks += u64::from(ticks);
        true
    }
}

/// Waits for the batch in flight and puts its lanes in place: for a save at the app's end, when no later frame
/// will collect it.
pub fn collect_now(in_flight: Option<ResMut<StepInFlight>>, mut b: Bookkeeping) {
    if let Some(mut in_flight) = in_flight {
        collect(&mut in_flight, &mut b, true);
    }
}

/// Update, first in ApplyMessages: a message that changes the lanes waits for the batch in flight, so it
/// applies to the finished state (as inline) and the batch's result cannot overwrite it. A recording with no
/// room for the actions this frame may bring ends first, at the state before them.
pub fn settle_before_messages(
    in_flight: Option<ResMut<StepInFlight>>,
    mut b: Bookkeeping,
    mut m: PendingMessages,
) {
    let messages = m.take();
    // At most one action per message and per pause-log entry, and the settings a rebuild keeps (one per lane).
    let kept_settings = if messages.rebuilds > 0 {
        b.lanes.iter().len()
    } else {
        0
    };
    let coming = messages.actions + kept_settings + b.control.pace_log.len();
    let room = b.recorder.has_room(coming);
    if let Some(mut in_flight) = in_flight
        && (messages.any || !room)
    {
        collect(&mut in_flight, &mut b, true);
    }
    if !room {
        let lanes = &b.lanes;
        let now = b.control.ticks;
        b.recorder.end_unless_room(now, coming, || {
            super::recording::hash_of_lanes(lanes.iter().map(|(_, lane, _)| lane))
        });
    }
}

/// Every message that changes a lane (own cursors, so each message settles the batch once).
#[derive(bevy::ecs::system::SystemParam)]
pub struct PendingMessages<'w, 's> {
    spawns: MessageReader<'w, 's, SpawnBall>,
    throws: MessageReader<'w, 's, ThrowBall>,
    rods: MessageReader<'w, 's, SpawnRod>,
    restarts: MessageReader<'w, 's, RestartScene>,
    loads: MessageReader<'w, 's, LoadScene>,
    cycles: MessageReader<'w, 's, CycleScene>,
    start_recording: MessageReader<'w, 's, StartRecording>,
    stop_recording: MessageReader<'w, 's, StopRecording>,
    start_replay: MessageReader<'w, 's, StartReplay>,
    stop_replay: MessageReader<'w, 's, StopReplay>,
}

/// What [`PendingMessages::take`] found.
struct Pending {
    /// Any message at all.
    any: bool,
    /// Messages that each lead to at most one recorded action.
    actions: usize,
    /// Of those, messages that rebuild the lanes (a rebuild also records the settings edits it keeps).
    rebuilds: usize,
}

impl PendingMessages<'_, '_> {
    /// The messages sent since the last call (marks them seen).
    fn take(&mut self) -> Pending {
        let rebuilds =
            self.throws.len() + self.restarts.len() + self.loads.len() + self.cycles.len();
        let actions = self.spawns.len() + self.rods.len() + rebuilds;
        let any = actions > 0
            || !(self.start_recording.is_empty()
                && self.stop_recording.is_empty()
                && self.start_replay.is_empty()
                && self.stop_replay.is_empty());
        self.spawns.clear();
        self.throws.clear();
        self.rods.clear();
        self.restarts.clear();
        self.loads.clear();
        self.cycles.clear();
        self.start_recording.clear();
        self.stop_recording.clear();
        self.start_replay.clear();
        self.stop_replay.clear();
        Pending {
            any,
            actions,
            rebuilds,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{MAX_BATCH, StepInFlight};

    fn after(last_step_ms: Option<u64>, owed: u32) -> StepInFlight {
        StepInFlight {
            owed,
            last_step: last_step_ms.map(Duration::from_millis),
            ..StepInFlight::default()
        }
    }

    #[test]
    fn the_display_moves_between_the_last_two_states_over_the_time_between_them() {
        let ms = Duration::from_millis;
        let mut f = StepInFlight::default();
        assert_eq!(f.display_fraction(ms(10)), None);
        f.arrivals = [Some(ms(1000)), Some(ms(1100))];
        assert_eq!(f.display_fraction(ms(1100)), Some(0.0));
        assert_eq!(f.display_fraction(ms(1150)), Some(0.5));
        assert_eq!(f.display_fraction(ms(1300)), Some(1.0));
        // After a long pause the next state still comes in within the cap.
        f.arrivals = [Some(ms(1000)), Some(ms(11_000))];
        assert_eq!(f.display_fraction(ms(11_250)), Some(0.5));
        f.arrivals = [Some(ms(1000)), Some(ms(1000))];
        assert_eq!(f.display_fraction(ms(1000)), Some(1.0));
    }

    #[test]
    fn a_batch_takes_the_owed_ticks_that_fit_in_a_frame() {
        let frame = Duration::from_millis(90);
        // Nothing measured yet: one tick.
        assert_eq!(after(None, 5).batch(frame), 1);
        // 9 ms steps in a 90 ms frame: all 5 owed ticks and the current one fit.
        assert_eq!(after(Some(9), 5).batch(frame), 6);
        // 30 ms steps: three fit.
        assert_eq!(after(Some(30), 5).batch(frame), 3);
        // A step slower than the frame: one, the rest is slow motion.
        assert_eq!(after(Some(200), 5).batch(frame), 1);
        // Never more than the cap.
        assert_eq!(after(Some(1), 100).batch(frame), MAX_BATCH);
        assert_eq!(after(Some(0), 3).batch(frame), 1);
    }
}
