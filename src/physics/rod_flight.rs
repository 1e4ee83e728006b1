//! Rods flying under gravity and hitting the floor y = `floor_y` inside a step (SPEC §3, f64).
//!
//! **Flight.** Between events a rod is ballistic: centre C(t) = C + V t + ½ g t², angle θ(t) = θ + ω t.
//! The end heights y_±(t) = C_y(t) ± (L/2) sin(θ + ω t) − floor_y are searched for their first downward
//! crossing *inside* the step: the interval is bisected left-first and a sub-interval is discarded only when
//! min(y(a), y(b)) > M (b − a)²/8 with M = |g_y| + (L/2) ω² ≥ |y''|, a bound under which no dip below the
//! floor can hide between two samples however fast the rod spins. The root is then bisected to 1e−15 s, the
//! rod is moved to the last time still above the floor, the impact law of [`crate::physics::rod`] is applied
//! there (r = end − centre, n = (0, 1)) and the rest of the step continues. At most
//! [`RodFlightSettings::max_events`] crossings are handled per step with the rod's e; the rest of the step's
//! impacts are inelastic (e = 0), which ends a Zeno series of ever smaller bounces.
//!
//! **Resting-contact rule** (the seed leaves persistent contact open; this is our choice):
//! 1. *Contact set.* An end is touching when its gap is ≤ `contact_slop` (1e−8 m).
//! 2. *Impact or rest.* A touching end approaching at ≥ `resting_speed` (5 cm/s) that was not already held gets the
//!    seed's restitution e; slower approaches, and ends that were already held, get e = 0 and Coulomb friction
//!    (μ = `friction_coefficient`, 0.5, capped by that end's normal impulse). Impacts stay frictionless.
//! 3. *Two ends at once* (a flat landing): if both touching ends approach, the two normal impulses are solved
//!    simultaneously so that c_k⁺ = −e_k c_k⁻; if that gives a negative impulse, the single-contact law is
//!    applied at each end in turn until both normal velocities are ≥ 0 (after 32 passes with e = 0 only).
//! 4. *Supported sub-steps.* While some end is touching with normal velocity below 1e−6 m/s (a held end), the
//!    rod is advanced in kick–hold–drift sub-steps: V += g Δs, the touching ends are resolved with e = 0 (plus
//!    friction), then the rod drifts rigidly with constant V and ω for Δs. A rod lying still is kicked and exactly
//!    cancelled, so it does not move; a rod pivoting on one end loses a little energy (the scheme is dissipative
//!    to first order) instead of gaining it. Δs is short enough that a held end, whose normal velocity is now
//!    ≥ 0, cannot dip more than `drift_sink_budget` through rotation ((L/2)|ω|³Δs³/6 ≤ 1e−9 m), with ω the spin
//!    after the kick and the hold. A held end that gravity keeps down (its free acceleration g_y − ω² r_y ≤ 0)
//!    stays held: a drift that lifted it along its rotation's curve lowers the rod back onto it. Other ends are
//!    root-found during the drift; if one crosses at s₁ < Δs the sub-step is redone with Δs = s₁. A touching end
//!    leaving faster than 1e−6 m/s flies exactly; if it comes back slower than `resting_speed`, e = 0 holds it.
//! 5. *Guards.* An end that ends a phase below the floor is recorded in the report's sink (before any fix) and
//!    the rod is lifted by that depth (position only). If a phase would raise the total energy, the velocities
//!    are scaled down until it does not; drift–kick integration is first order and the guard makes it
//!    dissipative. Every single impulse is dissipative by the law itself: K⁺ − K⁻ = −(1 − e²)(c⁻)²/(2W) ≤ 0.
//! 6. *Sleep.* When both ends touch and |V| and (L/2)|ω| are both below `sleep_speed`, V and ω are set to 0.

use crate::physics::DVec2;
use crate::physics::rod::{PlanarBody, contact_impulse};

/// A uniform thin rod in the plane.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rod {
    /// Centre of mass C, m.
    pub center: DVec2,
    /// θ, rad: the direction from the centre to the `Plus` end is (cos θ, sin θ).
    pub angle: f64,
    /// L > 0, m.
    pub length: f64,
    /// m > 0, kg.
    pub mass: f64,
    /// e ∈ [0, 1] for impacts with the floor.
    pub restitution: f64,
    /// V, m/s.
    pub velocity: DVec2,
    /// ω, rad/s, counter-clockwise positive.
    pub omega: f64,
}

/// The shortest rod a scene or a spawn may start: a micrometre, as the lightest mass is a milligram.
pub const MIN_ROD_LENGTH: f64 = 1e-6;

/// One end of a rod: `Plus` at C + (L/2)(cos θ, sin θ), `Minus` at C − (L/2)(cos θ, sin θ).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RodEnd {
    /// C + (L/2)(cos θ, sin θ).
    Plus,
    /// C − (L/2)(cos θ, sin θ).
    Minus,
}

impl RodEnd {
    /// Both ends, `Plus` first (the index order of per-end arrays in reports).
    pub const BOTH: [RodEnd; 2] = [RodEnd::Plus, RodEnd::Minus];

    /// σ = +1 for `Plus`, −1 for `Minus`.
    pub fn sign(self) -> f64 {
        match self {
            RodEnd::Plus => 1.0,
            RodEnd::Minus => -1.0,
        }
    }

    /// 0 for `Plus`, 1 for `Minus`.
    pub fn index(self) -> usize {
        match self {
            RodEnd::Plus => 0,
            RodEnd::Minus => 1,
        }
    }
}

/// A rod field that is out of its domain.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid rod: `{field}` {reason}, got {}", crate::text::number(*.value))]
pub struct RodError {
    /// The field's name in [`Rod`].
    pub field: &'static str,
    /// Its value.
    pub value: f64,
    /// What is wrong.
    pub reason: &'static str,
}

impl Rod {
    /// I = m L²/12 about the centre.
    pub fn inertia(&self) -> f64 {
        self.mass * self.length * self.length / 12.0
    }

    /// d = (cos θ, sin θ).
    pub fn direction(&self) -> DVec2 {
        DVec2::new(self.angle.cos(), self.angle.sin())
    }

    /// r = σ (L/2) d, the offset of `end` from the centre.
    pub fn end_offset(&self, end: RodEnd) -> DVec2 {
        end.sign() * 0.5 * self.length * self.direction()
    }

    /// C + r for `end`.
    pub fn end_position(&self, end: RodEnd) -> DVec2 {
        self.center + self.end_offset(end)
    }

    /// [C + (L/2) d, C − (L/2) d].
    pub fn endpoints(&self) -> [DVec2; 2] {
        RodEnd::BOTH.map(|end| self.end_position(end))
    }

    /// The velocity of `end`: V + ω × r.
    pub fn end_velocity(&self, end: RodEnd) -> DVec2 {
        self.body().point_velocity(self.end_offset(end))
    }

    /// min over the two ends of y.
    pub fn lowest_end_height(&self) -> f64 {
        let [plus, minus] = self.endpoints();
        plus.y.min(minus.y)
    }

    /// K = ½ m |V|² + ½ I ω².
    pub fn kinetic_energy(&self) -> f64 {
        self.body().kinetic_energy()
    }

    /// U = −m g · (C − (0, floor_y)); for g = (0, −g) this is m g (C_y − floor_y).
    pub fn potential_energy(&self, gravity: DVec2, floor_y: f64) -> f64 {
        -self.mass * gravity.dot(self.center - DVec2::new(0.0, floor_y))
    }

    /// E = K + U.
    pub fn energy(&self, gravity: DVec2, floor_y: f64) -> f64 {
        self.kinetic_energy() + self.potential_energy(gravity, floor_y)
    }

    /// Checks m > 0, L > 0, e ∈ [0, 1] and that every field is finite: what a step needs.
    pub fn validate(&self) -> Result<(), RodError> {
        let fields = [
            ("center.x", self.center.x),
            ("center.y", self.center.y),
            ("angle", self.angle),
            ("length", self.length),
            ("mass", self.mass),
            ("restitution", self.restitution),
            ("velocity.x", self.velocity.x),
            ("velocity.y", self.velocity.y),
            ("omega", self.omega),
        ];
        for (field, value) in fields {
            if !value.is_finite() {
                return Err(RodError {
                    field,
                    value,
                    reason: "must be finite",
                });
            }
        }
        if self.mass <= 0.0 {
            return Err(RodError {
                field: "mass",
                value: self.mass,
                reason: "must be > 0",
            });
        }
        if self.length <= 0.0 {
            return Err(RodError {
                field: "length",
                value: self.length,
                reason: "must be > 0",
            });
        }
        if !(0.0..=1.0).contains(&self.restitution) {
            return Err(RodError {
                field: "restitution",
                value: self.restitution,
                reason: "must be in [0, 1]",
            });
        }
        Ok(())
    }

    /// [`Self::validate`], and position, length and speeds within ±1e6 (m, m/s, rad/s) like a ball's: what a
    /// scene or a spawn may start a rod with. A rod that flies past these bounds keeps flying (a step checks only
    /// [`Self::validate`]).
    pub fn check_spawn(&self) -> Result<(), RodError> {
        match self.validate() {
            // A mass or a length at or below 0 is told the range a spawn allows, as one below it is.
            Err(e) if matches!(e.field, "mass" | "length") && e.reason == "must be > 0" => {}
            other => other?,
        }
        use super::world::{MAX_LENGTH, MAX_MASS, MAX_SPEED, MIN_MASS};
        // A rod of 10⁻³⁰⁰ m has no inertia a double can hold (its first step gave NaN everywhere), one of
        // 10⁻³²⁰ kg sank 23 mm into the floor, and one of 10³⁰⁸ kg had an infinite energy.
        if !(MIN_MASS..=MAX_MASS).contains(&self.mass) {
            return Err(RodError {
                field: "mass",
                value: self.mass,
                reason: "must be between 1e-6 kg and 1e6 kg",
            });
        }
        if self.length < MIN_ROD_LENGTH {
            return Err(RodError {
                field: "length",
                value: self.length,
                reason: "must be at least 1e-6 m",
            });
        }
        let bounded = [
            (
                "center.x",
                self.center.x,
                MAX_LENGTH,
                "must be within ±1e6 m",
            ),
            (
                "center.y",
                self.center.y,
                MAX_LENGTH,
                "must be within ±1e6 m",
            ),
            ("length", self.length, MAX_LENGTH, "must be at most 1e6 m"),
            (
                "velocity.x",
                self.velocity.x,
                MAX_SPEED,
                "must be within ±1e6 m/s",
            ),
            (
                "velocity.y",
                self.velocity.y,
                MAX_SPEED,
                "must be within ±1e6 m/s",
            ),
            ("omega", self.omega, MAX_SPEED, "must be within ±1e6 rad/s"),
        ];
        for (field, value, limit, reason) in bounded {
            if value.abs() > limit {
                return Err(RodError {
                    field,
                    value,
                    reason,
                });
            }
        }
        Ok(())
    }

    /// The rod's velocity state for the impact law.
    pub fn body(&self) -> PlanarBody {
        PlanarBody {
            velocity: self.velocity,
            omega: self.omega,
            mass: self.mass,
            inertia: self.inertia(),
        }
    }

    fn set_body(&mut self, body: &PlanarBody) {
        self.velocity = body.velocity;
        self.omega = body.omega;
    }

    /// Height of `end` above the floor after moving for time s with centre acceleration `acceleration`:
    /// C_y + V_y s + ½ a_y s² + σ (L/2) sin(θ + ω s) − floor_y.
    fn end_gap_after(&self, end: RodEnd, floor_y: f64, acceleration: DVec2, s: f64) -> f64 {
        self.center.y
            + self.velocity.y * s
            + 0.5 * acceleration.y * s * s
            + end.sign() * 0.5 * self.length * (self.angle + self.omega * s).sin()
            - floor_y
    }

    /// Moves the rod rigidly for time s: C += V s + ½ a s², V += a s, θ += ω s.
    fn advance(&mut self, s: f64, acceleration: DVec2) {
        self.center += self.velocity * s + 0.5 * acceleration * s * s;
        self.velocity += acceleration * s;
        self.angle += self.omega * s;
    }
}

/// Tuning of the flight and resting-contact rule (module docs). The defaults are what the tests measure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RodFlightSettings {
    /// Approach speeds below this use e = 0 and count as resting contact, m/s.
    pub resting_speed: f64,
    /// An end within this gap of the floor is touching, m.
    pub contact_slop: f64,
    /// Crossings handled per step before the remainder is advanced in one safe sub-step.
    pub max_events: usize,
    /// Coulomb μ for resting contacts (impacts are frictionless, as in the seed).
    pub friction_coefficient: f64,
    /// Both ends touching with |V| and (L/2)|ω| below this: the rod sleeps (V = 0, ω = 0), m/s.
    pub sleep_speed: f64,
    /// How far a held end may dip through rotation during one drift sub-step, m.
    pub drift_sink_budget: f64,
    /// Largest rotation ω Δs of one drift sub-step, rad (accuracy of the drift–kick integration).
    pub max_drift_rotation: f64,
}

impl Default for RodFlightSettings {
    fn default() -> Self {
        Self {
            resting_speed: 0.05,
            contact_slop: 1e-8,
            max_events: 64,
            friction_coefficient: 0.5,
            sleep_speed: 1e-4,
            drift_sink_budget: 1e-9,
            max_drift_rotation: 0.02,
        }
    }
}

/// One impact (an approach at ≥ `resting_speed` at an end that was not already held) within a step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RodImpact {
    /// Time since the start of the step, s.
    pub time: f64,
    /// Which end hit.
    pub end: RodEnd,
    /// Where, m.
    pub contact_point: DVec2,
    /// The rod's centre C at that moment, m.
    pub center: DVec2,
    /// Total impulse at that end in this resolution (normal j_n n, plus friction if any), N s.
    pub impulse: DVec2,
    /// c⁻ = n · v_end before, m/s (negative: approaching).
    pub normal_velocity_before: f64,
    /// c⁺ after, m/s (≥ 0 up to 1e−12).
    pub normal_velocity_after: f64,
    /// The e used for this end's first impulse.
    pub restitution_used: f64,
    /// K⁺ − K⁻ of the whole resolution this impact belongs to, J (≤ 0).
    pub kinetic_energy_change: f64,
}

impl RodImpact {
    /// The end that hit, as someone watching sees it: "left end" or "right end" (left or right of the centre at
    /// that moment), "lower end" (seed 003's word) for a rod standing vertically. The drawn rod does not mark
    /// its `Plus` and `Minus` ends, and they swap sides as it turns.
    pub fn end_words(&self) -> &'static str {
        let offset = self.contact_point - self.center;
        if offset.x.abs() <= 1e-9 * offset.length() {
            "lower end"
        } else if offset.x < 0.0 {
            "left end"
        } else {
            "right end"
        }
    }
}

/// θ wrapped to (−π, π], for display and reports: a rod lying flat reads 0 or π, not 6.283185 or −18.85. The
/// stored θ is never wrapped (the state, and the replay hashes over it, stay as stepped).
pub fn wrapped_angle(theta: f64) -> f64 {
    use std::f64::consts::{PI, TAU};
    // rem_euclid is in [0, 2π], 2π only by rounding for a tiny negative θ, which then maps to 0.
    let turn = theta.rem_euclid(TAU);
    if turn > PI { turn - TAU } else { turn }
}

/// What happened in one [`step_rod`] call.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RodStepReport {
    /// The impacts, in time order.
    pub impacts: Vec<RodImpact>,
    /// Resting-contact (support and friction) impulse summed over the step at [`RodEnd::Plus`, `Minus`], N s.
    pub support_impulse: [DVec2; 2],
    /// max(0, floor_y − lowest end) after the step.
    pub sink_depth: f64,
    /// The deepest penetration seen at any phase end in the step, before the position fix, m.
    pub max_sink_depth: f64,
    /// Total upward position fix applied, m.
    pub position_fix: f64,
    /// E = K + U at the start and end of the step, J.
    pub energy_before: f64,
    /// E after the step, J.
    pub energy_after: f64,
    /// Energy removed by the no-gain guard (module docs, rule 5), J.
    pub energy_trimmed: f64,
    /// Floor crossings found inside the step.
    pub crossings: usize,
    /// Drift–kick sub-steps taken in resting contact.
    pub supported_substeps: usize,
    /// The crossing cap was hit and the remainder was advanced in one safe sub-step.
    pub event_cap_reached: bool,
    /// The rod was put to sleep (or stayed asleep) this step.
    pub asleep: bool,
    /// Set when the step was not taken (bad rod or bad step); the rod is unchanged then.
    pub skipped: Option<String>,
}

/// One step of length h with the default [`RodFlightSettings`]; see [`step_rod_with`].
pub fn step_rod(rod: &mut Rod, floor_y: f64, gravity: DVec2, h: f64) -> RodStepReport {
    step_rod_with(rod, floor_y, gravity, h, &RodFlightSettings::default())
}

const FLOOR_NORMAL: DVec2 = DVec2::Y;
/// Roots are bisected until the bracket is this short, s.
const TIME_TOLERANCE: f64 = 1e-15;
/// Normal velocities above −this count as non-approaching after a resolution, m/s.
const NORMAL_VELOCITY_TOLERANCE: f64 = 1e-13;
/// A touching end whose normal velocity is below this is held (resting contact) rather than flying off, m/s.
/// A faster one leaves in exact flight; if it comes back slower than `resting_speed`, e = 0 catches it.
const HOLD_SPEED: f64 = 1e-6;
/// Safety cap on the phases of one step (each phase advances time or handles a crossing).
const MAX_PHASES: usize = 100_000;
/// Safety cap on height evaluations of one root search.
const MAX_ROOT_EVALUATIONS: usize = 20_000;

/// Advances `rod` by h under `gravity` above the floor y = `floor_y`: ballistic flight, impacts found inside the
/// step by root-finding and resolved with the seed's law at the contact time, and the resting-contact rule of the
/// module docs. Invalid input (a rod failing [`Rod::validate`], h ≤ 0, non-finite h, floor or gravity) leaves the
/// rod unchanged and says why in [`RodStepReport::skipped`].
pub fn step_rod_with(
    rod: &mut Rod,
    floor_y: f64,
    gravity: DVec2,
    h: f64,
    settings: &RodFlightSettings,
) -> RodStepReport {
    let mut report = RodStepReport::default();
    if let Err(error) = rod.validate() {
        report.skipped = Some(error.to_string());
        return report;
    }
    if !(h.is_finite() && h > 0.0 && floor_y.is_finite() && gravity.is_finite()) {
        report.skipped = Some(format!(
            "invalid step: h = {h}, floor_y = {floor_y}, gravity = {gravity}"
        ));
        return report;
    }
    report.energy_before = rod.energy(gravity, floor_y);

    let mut time = 0.0;
    let start_energy = report.energy_before;
    project_onto_floor(rod, floor_y, &mut report);
    resolve_contacts(rod, floor_y, settings, time, [false; 2], &mut report);
    guard_energy(rod, gravity, floor_y, start_energy, &mut report);

    let restitution = rod.restitution;
    let mut phases = 0;
    // Ends the last supported drift kept on the floor ([`settle_held_ends`]): still held, whatever normal
    // velocity the drift's rotation left them.
    let mut settled = [false; 2];
    while h - time > TIME_TOLERANCE && phases < MAX_PHASES {
        phases += 1;
        let remaining = h - time;
        let phase_energy = rod.energy(gravity, floor_y);
        let touching = touching_ends(rod, floor_y, settings);
        let normal_velocity = RodEnd::BOTH.map(|end| rod.end_velocity(end).y);
        let held_now = RodEnd::BOTH.map(|end| {
            let i = end.index();
            touching[i] && (normal_velocity[i] < HOLD_SPEED || settled[i])
        });
        settled = [false; 2];
        let supported = held_now.contains(&true);

        if report.crossings >= settings.max_events && !report.event_cap_reached {
            // Crossing cap: a rod of e near 1 bounces ever lower and faster (a Zeno series of impacts), and a step
            // of a second has room for thousands. From here to the step's end its impacts are inelastic (e = 0),
            // which ends the series: the ends come to rest and are held. Drifting the rest of the step in one
            // piece, as this did before, sank such a rod metres into the floor at h = 1.8 s.
            report.event_cap_reached = true;
            rod.restitution = 0.0;
        }
        let held = if phases == MAX_PHASES {
            // The last phase the step may take: what is left in one kick–drift sub-step; the guards lift the rod
            // back and keep the energy from rising.
            kick_and_hold(
                rod,
                floor_y,
                settings,
                time,
                gravity,
                remaining,
                &mut report,
            );
            rod.advance(remaining, DVec2::ZERO);
            time = h;
            [true; 2]
        } else if supported {
            // Kick, hold the touching ends (e = 0), drift. If another end crosses at s₁ inside the sub-step,
            // redo the kick for s₁ only, so gravity is applied for the time actually advanced.
            let before = *rod;
            let (substep, trial_report) =
                kicked_substep(rod, floor_y, settings, time, gravity, remaining);
            let (mut duration, mut crossed) =
                first_crossing(rod, floor_y, DVec2::ZERO, substep, &touching, None);
            if crossed {
                *rod = before;
                kick_and_hold(rod, floor_y, settings, time, gravity, duration, &mut report);
                let (again, crossed_again) =
                    first_crossing(rod, floor_y, DVec2::ZERO, duration, &touching, None);
                (duration, crossed) = (again, crossed_again);
            } else {
                merge_support(&mut report, &trial_report);
            }
            rod.advance(duration, DVec2::ZERO);
            settled = settle_held_ends(rod, floor_y, gravity, held_now);
            if crossed {
                // The other end's impact, resolved below, may throw this one up for real (a rod rocking onto
                // its other end): it is held again only if it comes to rest on the floor.
                settled = [false; 2];
            }
            time += duration;
            report.supported_substeps += 1;
            report.crossings += usize::from(crossed);
            touching
        } else {
            let (duration, crossed) = first_crossing(
                rod,
                floor_y,
                gravity,
                remaining,
                &touching,
                Some(&normal_velocity),
            );
            rod.advance(duration, gravity);
            time += duration;
            report.crossings += usize::from(crossed);
            [false; 2]
        };
        project_onto_floor(rod, floor_y, &mut report);
        resolve_contacts(rod, floor_y, settings, time, held, &mut report);
        guard_energy(rod, gravity, floor_y, phase_energy, &mut report);
        put_to_sleep_if_still(rod, floor_y, settings, &mut report);
    }

    rod.restitution = restitution;
    report.sink_depth = (floor_y - rod.lowest_end_height()).max(0.0);
    report.energy_after = rod.energy(gravity, floor_y);
    report
}

fn touching_ends(rod: &Rod, floor_y: f64, settings: &RodFlightSettings) -> [bool; 2] {
    RodEnd::BOTH.map(|end| rod.end_position(end).y - floor_y <= settings.contact_slop)
}

/// Δs for a drift sub-step: ≤ remaining, ω Δs ≤ `max_drift_rotation`, and (L/2)|ω|³Δs³/6 ≤ `drift_sink_budget`
/// (the third-order dip of a held end whose normal velocity is ≥ 0).
fn supported_substep(rod: &Rod, remaining: f64, settings: &RodFlightSettings) -> f64 {
    let spin = rod.omega.abs();
    if spin == 0.0 {
        return remaining;
    }
    let by_rotation = settings.max_drift_rotation / spin;
    let by_sink = (6.0 * settings.drift_sink_budget / (0.5 * rod.length * spin.powi(3))).cbrt();
    remaining.min(by_rotation).min(by_sink)
}

/// The earliest downward floor crossing of an end within [0, duration] under centre acceleration `acceleration`.
/// Returns (time to advance, whether a crossing ended the phase). Touching ends are skipped, except in flight
/// (`separating` given) where a touching end leaving at c ≥ `resting_speed` is searched from τ₀ = c/M on, since
/// y(τ) ≥ y(0) + cτ − ½Mτ² keeps it above the floor before that.
fn first_crossing(
    rod: &Rod,
    floor_y: f64,
    acceleration: DVec2,
    duration: f64,
    touching: &[bool; 2],
    separating: Option<&[f64; 2]>,
) -> (f64, bool) {
    let curvature_bound = acceleration.y.abs() + 0.5 * rod.length * rod.omega * rod.omega;
    let mut earliest: Option<f64> = None;
    for end in RodEnd::BOTH {
        let height = |s: f64| rod.end_gap_after(end, floor_y, acceleration, s);
        let start = if touching[end.index()] {
            match separating {
                Some(normal_velocity) if curvature_bound > 0.0 => {
                    normal_velocity[end.index()] / curvature_bound
                }
                _ => continue,
            }
        } else {
            0.0
        };
        let limit = earliest.unwrap_or(duration);
        if start >= limit {
            continue;
        }
        if let Some(time) = earliest_downward_crossing(&height, curvature_bound, start, limit) {
            earliest = Some(earliest.map_or(time, |best: f64| best.min(time)));
        }
    }
    match earliest {
        Some(time) => (time, true),
        None => (duration, false),
    }
}

/// The first time in (start, end] where `height` (with |height''| ≤ M) goes from > 0 to ≤ 0, returned as the last
/// bisection point still above the floor. A sub-interval [a, b] is discarded when min(y(a), y(b)) > M (b − a)²/8,
/// which bounds y from below on [a, b]; everything else is split, earlier half first, so no dip is missed.
fn earliest_downward_crossing(
    height: &dyn Fn(f64) -> f64,
    curvature_bound: f64,
    start: f64,
    end: f64,
) -> Option<f64> {
    let start_height = height(start);
    if start_height <= 0.0 {
        return Some(start);
    }
    let mut stack = vec![(start, start_height, end, height(end))];
    let mut evaluations = 2;
    while let Some((a, height_a, b, height_b)) = stack.pop() {
        if height_a <= 0.0 {
            return Some(a);
        }
        let width = b - a;
        if height_b > 0.0 && height_a.min(height_b) > curvature_bound * width * width / 8.0 {
            continue;
        }
        if width <= TIME_TOLERANCE {
            if height_b <= 0.0 {
                return Some(a);
            }
            continue;
        }
        if evaluations >= MAX_ROOT_EVALUATIONS {
            // Out of budget: stop at the start of the interval we could not clear; the loop goes on from there.
            return Some(a);
        }
        let mid = 0.5 * (a + b);
        let height_mid = height(mid);
        evaluations += 1;
        stack.push((mid, height_mid, b, height_b));
        stack.push((a, height_a, mid, height_mid));
    }
    None
}

/// Puts back on the floor an end that a supported drift lifted off it and that gravity would have kept there.
///
/// The drift moves the rod rigidly without gravity, so a `held` end pivoting under a tilted rod rises along the
/// curve of its rotation, by about (L/2)|sin θ| ω² Δs² / 2, and ends moving up, by about (L/2)|sin θ| ω² Δs. On
/// its own the end would then leave the contact set, fall back and be caught again: a review's rod pivoting at
/// ω = 1.5 rad/s did so every 0.5 ms, used up the step's crossings in 30 ms of its 0.2 s step, and the rest,
/// drifted in one piece, sank it 0.13 m. An end leaves the floor for real only where its free acceleration,
/// g_y − ω² r_y (r from the centre to the end; no torque acts without the contact), points up. Any other held
/// end stays held: it is returned as settled (the next phase holds it whatever its normal velocity, and its kick
/// and hold correct that), and if the drift left it above the floor the rod is lowered onto it, by the smaller of
/// those gaps and never past another end's. The velocities are kept, and the energy can only fall.
fn settle_held_ends(rod: &mut Rod, floor_y: f64, gravity: DVec2, held: [bool; 2]) -> [bool; 2] {
    let settled = RodEnd::BOTH.map(|end| {
        held[end.index()] && gravity.y - rod.omega * rod.omega * rod.end_offset(end).y <= 0.0
    });
    let gap = |rod: &Rod, end: RodEnd| rod.end_position(end).y - floor_y;
    let lift = RodEnd::BOTH
        .into_iter()
        .filter(|end| settled[end.index()])
        .map(|end| gap(rod, end))
        .fold(f64::INFINITY, f64::min);
    let room = RodEnd::BOTH
        .into_iter()
        .map(|end| gap(rod, end))
        .fold(f64::INFINITY, f64::min);
    let drop = lift.min(room);
    if drop.is_finite() && drop > 0.0 {
        rod.center.y -= drop;
    }
    settled
}

/// The kick of a supported sub-step and its length Δs ≤ `remaining`, with `rod` left kicked and held: Δs is
/// bounded ([`supported_substep`]) by the spin the rod drifts with, which is the spin *after* the kick and the
/// hold. A rod at rest on one end has none before; the hold gives it one, in proportion to Δs, so Δs is halved
/// (or cut to what the new spin allows) until the spin it leaves allows it. Sized by the spin before, a step of
/// 0.2 s drifted whole on one end and sank it 0.12 m through the floor.
fn kicked_substep(
    rod: &mut Rod,
    floor_y: f64,
    settings: &RodFlightSettings,
    time: f64,
    gravity: DVec2,
    remaining: f64,
) -> (f64, RodStepReport) {
    /// Halvings before the sub-step is taken as it is; each halves it, so this is far below any spin's need.
    const MAX_HALVINGS: usize = 64;
    let before = *rod;
    let mut substep = supported_substep(rod, remaining, settings);
    for _ in 0..MAX_HALVINGS {
        let mut report = RodStepReport::default();
        kick_and_hold(rod, floor_y, settings, time, gravity, substep, &mut report);
        let allowed = supported_substep(rod, remaining, settings);
        if allowed >= substep {
            return (substep, report);
        }
        *rod = before;
        substep = allowed.min(0.5 * substep);
    }
    let mut report = RodStepReport::default();
    kick_and_hold(rod, floor_y, settings, time, gravity, substep, &mut report);
    (substep, report)
}

/// The velocity half of a resting sub-step: V += g Δs, then the touching ends are resolved as held (e = 0).
fn kick_and_hold(
    rod: &mut Rod,
    floor_y: f64,
    settings: &RodFlightSettings,
    time: f64,
    gravity: DVec2,
    substep: f64,
    report: &mut RodStepReport,
) {
    rod.velocity += gravity * substep;
    resolve_contacts(rod, floor_y, settings, time, [true; 2], report);
}

fn merge_support(report: &mut RodStepReport, trial: &RodStepReport) {
    for index in 0..2 {
        report.support_impulse[index] += trial.support_impulse[index];
    }
}

/// Position-only guard: records the deepest end below the floor and lifts the rod by that depth.
fn project_onto_floor(rod: &mut Rod, floor_y: f64, report: &mut RodStepReport) {
    let depth = floor_y - rod.lowest_end_height();
    if depth > 0.0 {
        report.max_sink_depth = report.max_sink_depth.max(depth);
        report.position_fix += depth;
        rod.center.y += depth;
    }
}

/// If the phase raised E above `energy_limit`, scale (V, ω) so K drops by the excess (to 0 at most).
fn guard_energy(
    rod: &mut Rod,
    gravity: DVec2,
    floor_y: f64,
    energy_limit: f64,
    report: &mut RodStepReport,
) {
    let excess = rod.energy(gravity, floor_y) - energy_limit;
    if excess <= 0.0 {
        return;
    }
    let kinetic = rod.kinetic_energy();
    let scale = if kinetic > excess {
        ((kinetic - excess) / kinetic).sqrt()
    } else {
        0.0
    };
    rod.velocity *= scale;
    rod.omega *= scale;
    report.energy_trimmed += kinetic * (1.0 - scale * scale);
}

fn put_to_sleep_if_still(
    rod: &mut Rod,
    floor_y: f64,
    settings: &RodFlightSettings,
    report: &mut RodStepReport,
) {
    let touching = touching_ends(rod, floor_y, settings);
    let still = rod.velocity.length() < settings.sleep_speed
        && 0.5 * rod.length * rod.omega.abs() < settings.sleep_speed;
    if touching == [true; 2] && still {
        rod.velocity = DVec2::ZERO;
        rod.omega = 0.0;
        report.asleep = true;
    }
}

/// Resolves the touching ends (module docs, rules 2–3). `held` ends were already in resting contact: e = 0 and
/// friction. Other ends approaching at ≥ `resting_speed` are impacts with the rod's e; slower ones rest.
fn resolve_contacts(
    rod: &mut Rod,
    floor_y: f64,
    settings: &RodFlightSettings,
    time: f64,
    held: [bool; 2],
    report: &mut RodStepReport,
) {
    let touching = touching_ends(rod, floor_y, settings);
    if touching == [false; 2] {
        return;
    }
    let mut body = rod.body();
    let kinetic_before = body.kinetic_energy();
    let offsets = RodEnd::BOTH.map(|end| rod.end_offset(end));
    let normal_velocity =
        |body: &PlanarBody, index: usize| FLOOR_NORMAL.dot(body.point_velocity(offsets[index]));
    let initial_velocity = [normal_velocity(&body, 0), normal_velocity(&body, 1)];
    let approaching =
        [0, 1].map(|index| touching[index] && initial_velocity[index] < -NORMAL_VELOCITY_TOLERANCE);
    if approaching == [false; 2] {
        return;
    }
    let is_impact = [0, 1].map(|index| {
        approaching[index] && !held[index] && -initial_velocity[index] >= settings.resting_speed
    });
    let restitution = [0, 1].map(|index| {
        if is_impact[index] {
            rod.restitution
        } else {
            0.0
        }
    });
    let mut normal_total = [0.0_f64; 2];
    let mut friction_total = [0.0_f64; 2];

    let simultaneous = approaching == [true; 2] && {
        match simultaneous_impulses(&body, &offsets, &initial_velocity, &restitution) {
            Some(impulses) => {
                for index in 0..2 {
                    body.apply_impulse(offsets[index], FLOOR_NORMAL * impulses[index]);
                    normal_total[index] += impulses[index];
                }
                true
            }
            None => false,
        }
    };
    if !simultaneous {
        sequential_normal_passes(
            &mut body,
            &offsets,
            &touching,
            &restitution,
            &mut normal_total,
        );
    }

    // Coulomb friction at resting ends, each impulse driving the tangential slip toward 0 without overshoot.
    if settings.friction_coefficient > 0.0 {
        for index in 0..2 {
            if touching[index] && !is_impact[index] && normal_total[index] > 0.0 {
                let slip = body.point_velocity(offsets[index]).x;
                let inverse_mass = body.inverse_effective_mass(offsets[index], DVec2::X);
                let limit = settings.friction_coefficient * normal_total[index];
                let friction = (-slip / inverse_mass).clamp(-limit, limit);
                body.apply_impulse(offsets[index], DVec2::X * friction);
                friction_total[index] += friction;
            }
        }
        sequential_normal_passes(&mut body, &offsets, &touching, &[0.0; 2], &mut normal_total);
    }

    let kinetic_change = body.kinetic_energy() - kinetic_before;
    rod.set_body(&body);
    for end in RodEnd::BOTH {
        let index = end.index();
        let impulse = DVec2::new(friction_total[index], normal_total[index]);
        if impulse == DVec2::ZERO {
            continue;
        }
        if is_impact[index] {
            report.impacts.push(RodImpact {
                time,
                end,
                contact_point: rod.end_position(end),
                center: rod.center,
                impulse,
                normal_velocity_before: initial_velocity[index],
                normal_velocity_after: normal_velocity(&body, index),
                restitution_used: restitution[index],
                kinetic_energy_change: kinetic_change,
            });
        } else {
            report.support_impulse[index] += impulse;
        }
    }
}

/// Both ends approach: solve A j = −(1 + e_k) c_k⁻ with A_kl = J_k M⁻¹ J_lᵀ. Accepted only if both j_k ≥ 0, so
/// K⁺ − K⁻ = Σ j_k (1 − e_k) c_k⁻ / 2 ≤ 0.
fn simultaneous_impulses(
    body: &PlanarBody,
    offsets: &[DVec2; 2],
    initial_velocity: &[f64; 2],
    restitution: &[f64; 2],
) -> Option<[f64; 2]> {
    let lever = offsets.map(|offset| offset.perp_dot(FLOOR_NORMAL));
    let coupling = |k: usize, l: usize| 1.0 / body.mass + lever[k] * lever[l] / body.inertia;
    let (a00, a01, a11) = (coupling(0, 0), coupling(0, 1), coupling(1, 1));
    let determinant = a00 * a11 - a01 * a01;
    if determinant <= 1e-12 * a00 * a11 {
        return None;
    }
    let target = [0, 1].map(|k| -(1.0 + restitution[k]) * initial_velocity[k]);
    let impulses = [
        (a11 * target[0] - a01 * target[1]) / determinant,
        (a00 * target[1] - a01 * target[0]) / determinant,
    ];
    (impulses[0] >= 0.0 && impulses[1] >= 0.0).then_some(impulses)
}

/// The single-contact law applied at each approaching touching end in turn until none approaches; after 32
/// passes only with e = 0, which converges (Gauss–Seidel on a positive definite 2 × 2 system).
fn sequential_normal_passes(
    body: &mut PlanarBody,
    offsets: &[DVec2; 2],
    touching: &[bool; 2],
    restitution: &[f64; 2],
    normal_total: &mut [f64; 2],
) {
    for pass in 0..96 {
        let mut applied = false;
        for index in 0..2 {
            if !touching[index] {
                continue;
            }
            let law_restitution = if pass < 32 { restitution[index] } else { 0.0 };
            let outcome = contact_impulse(body, offsets[index], FLOOR_NORMAL, law_restitution);
            if outcome.c_minus < -NORMAL_VELOCITY_TOLERANCE {
                body.velocity = outcome.velocity_plus;
                body.omega = outcome.omega_plus;
                normal_total[index] += outcome.normal_impulse;
                applied = true;
            }
        }
        if !applied {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRAVITY: DVec2 = DVec2::new(0.0, -9.81);

    #[test]
    fn a_rod_flying_past_the_spawn_bounds_keeps_flying() {
        let mut rod = Rod {
            center: DVec2::new(0.0, 999_990.0),
            angle: 0.3,
            length: 1.0,
            mass: 1.0,
            restitution: 0.5,
            velocity: DVec2::new(0.0, 1e5),
            omega: 0.0,
        };
        assert_eq!(rod.check_spawn(), Ok(()));
        let settings = RodFlightSettings::default();
        for _ in 0..2 {
            let before = rod.center.y;
            let report = step_rod_with(&mut rod, 0.0, GRAVITY, 0.01, &settings);
            assert_eq!(report.skipped, None);
            assert!(
                rod.center.y > before + 900.0,
                "{} -> {}",
                before,
                rod.center.y
            );
        }
        assert!(rod.center.y > 1e6);
        assert!(rod.check_spawn().is_err(), "a spawn there would be refused");
    }

    fn flat_rod_at_rest() -> Rod {
        Rod {
            center: DVec2::new(0.3, 0.0),
            angle: 0.0,
            length: 1.0,
            mass: 2.0,
            restitution: 0.5,
            velocity: DVec2::ZERO,
            omega: 0.0,
        }
    }

    #[test]
    fn resting_flat_rod_does_not_move_at_all() {
        let mut rod = flat_rod_at_rest();
        let start = rod;
        for _ in 0..600 {
            let report = step_rod(&mut rod, 0.0, GRAVITY, 1.0 / 60.0);
            assert!(report.impacts.is_empty());
            assert_eq!(report.max_sink_depth, 0.0);
        }
        assert_eq!(rod, start);
    }

    /// SPEC §3: a rod must not sink below the floor (by more than 10⁻⁶ m) nor gain energy, at any h a lane takes
    /// (up to 10 s). A held end's drift used to be sized by the spin *before* its sub-step's kick, which for a
    /// rod at rest on one end is none: the kick and the hold then gave it a spin, and the whole remaining step
    /// drifted on it. A review's rods (the first two below) sank 0.40 m at h = 0.2 s and 2.35 m at h = 0.5 s,
    /// and the lifts back out raised the energy from 1.036 J to 1.398 J. The rest are random rods and steps none
    /// of the shipped scenes use.
    #[test]
    fn a_rod_at_a_long_step_neither_sinks_nor_gains_energy() {
        let tilted = |center_y: f64, angle: f64, restitution: f64, omega: f64| Rod {
            center: DVec2::new(0.0, center_y),
            angle,
            length: 0.3,
            mass: 1.0,
            restitution,
            velocity: DVec2::ZERO,
            omega,
        };
        let mut cases = vec![
            (tilted(0.095, 0.02, 0.0, -3.0), 0.2, GRAVITY, 15),
            (
                tilted(0.105_647_580_317_713_51, 0.751_103_623_667_052_7, 0.3, 0.0),
                0.5,
                GRAVITY,
                6,
            ),
        ];
        let mut next = crate::testing::uniform(0x50_1D_E0);
        for _ in 0..1000 {
            let length = 0.05 + 2.0 * next();
            let rod = Rod {
                center: DVec2::new(0.0, 0.5 * length + 0.5 * next()),
                angle: 6.0 * next() - 3.0,
                length,
                mass: 0.1 + 5.0 * next(),
                restitution: next(),
                velocity: DVec2::new(4.0 * next() - 2.0, 4.0 * next() - 2.0),
                omega: 20.0 * next() - 10.0,
            };
            let h = 0.05 + 2.0 * next();
            let gravity = DVec2::new(0.0, -(1.0 + 30.0 * next()));
            cases.push((rod, h, gravity, 8));
        }
        for (case, (mut rod, h, gravity, steps)) in cases.into_iter().enumerate() {
            let start = rod;
            for step in 0..steps {
                let report = step_rod(&mut rod, 0.0, gravity, h);
                assert_eq!(report.skipped, None);
                let context = format!("case {case}, step {step}, h = {h}: {start:?}");
                assert!(
                    report.max_sink_depth <= 1e-6 && rod.lowest_end_height() >= -1e-6,
                    "sank {} ({context})",
                    report.max_sink_depth
                );
                let scale = report.energy_before.abs().max(1.0);
                assert!(
                    report.energy_after <= report.energy_before + 1e-9 * scale,
                    "{} J -> {} J ({context})",
                    report.energy_before,
                    report.energy_after
                );
            }
        }
    }

    /// The rule that keeps a pivoting end held (`settle_held_ends`) must not hold down an end that leaves for
    /// real: a rod standing at 0.3 rad on its lower end, that end at rest on the floor, spins about it at
    /// 50 rad/s. Swinging its centre round at that rate takes ω² (L/2) sin θ = 369 m/s² towards the end, far
    /// more than g, so the end is pulled off the floor (its free acceleration g_y − ω² r_y points up) and the rod
    /// flies clear within the step.
    #[test]
    fn a_rod_spun_about_its_resting_end_pulls_it_off_the_floor() {
        let (length, angle, omega) = (1.0, 0.3_f64, 50.0);
        let lower = -0.5 * length * DVec2::new(angle.cos(), angle.sin());
        let mut rod = Rod {
            center: DVec2::new(0.0, -lower.y),
            angle,
            length,
            mass: 2.0,
            restitution: 0.0,
            // The lower end at rest: V + ω × r = 0.
            velocity: -omega * DVec2::new(-lower.y, lower.x),
            omega,
        };
        assert!(rod.end_velocity(RodEnd::Minus).length() < 1e-12);
        let report = step_rod(&mut rod, 0.0, GRAVITY, 0.01);
        assert!(report.energy_after <= report.energy_before + 1e-9);
        assert!(
            rod.lowest_end_height() > 1e-3,
            "held down: lowest end {} m above the floor",
            rod.lowest_end_height()
        );
    }

    #[test]
    fn free_fall_impact_time_matches_the_parabola() {
        // Flat rod 0.1 m up at rest: it lands at t = √(2 · 0.1 / 9.81) = 0.142784 s, inside step 9 (h = 1/60).
        let mut rod = Rod {
            center: DVec2::new(0.0, 0.1),
            ..flat_rod_at_rest()
        };
        let landing = (2.0 * 0.1 / 9.81_f64).sqrt();
        let step = 1.0 / 60.0;
        for index in 0..9 {
            let report = step_rod(&mut rod, 0.0, GRAVITY, step);
            if let Some(impact) = report.impacts.first() {
                assert_eq!(index, 8);
                assert!(
                    (index as f64 * step + impact.time - landing).abs() < 1e-12,
                    "{impact:?}"
                );
                return;
            }
        }
        panic!("no impact");
    }

    /// Random rods (lengths, masses, angles, spins, velocities and gravity none of them the spec's) high enough
    /// that no end can reach the floor: after `n` steps of `h` the rod is exactly ballistic, `C(t) = C + V t +
    /// ½ g t²`, `V(t) = V + g t`, `θ(t) = θ + ω t`, `ω` constant, written out here in closed form at `t = n h`. The
    /// steps sum `n` advances, so the tolerance is 10⁻¹² of the largest term (a few roundings per step).
    #[test]
    fn a_rod_clear_of_the_floor_flies_the_closed_form_parabola() {
        let mut next = crate::testing::uniform(0xF1_1647);
        for case in 0..300 {
            let gravity = DVec2::new(2.0 * next() - 1.0, -(5.0 + 10.0 * next()));
            let velocity = DVec2::new(6.0 * next() - 3.0, 6.0 * next() - 3.0);
            let (h, steps) = (0.002 + 0.02 * next(), 1 + (case % 10));
            let t = h * steps as f64;
            let length = 0.1 + 2.0 * next();
            // The lowest the centre can go in time t, plus half the length and a margin.
            let drop = velocity.y.min(0.0).abs() * t + 0.5 * gravity.y.abs() * t * t;
            let start = Rod {
                center: DVec2::new(4.0 * next() - 2.0, drop + 0.5 * length + 0.01 + next()),
                angle: 8.0 * next() - 4.0,
                length,
                mass: 0.1 + 5.0 * next(),
                restitution: next(),
                velocity,
                omega: 20.0 * next() - 10.0,
            };
            let mut rod = start;
            for _ in 0..steps {
                let report = step_rod(&mut rod, 0.0, gravity, h);
                assert!(
                    report.impacts.is_empty() && report.crossings == 0,
                    "case {case}"
                );
            }
            let center = start.center + start.velocity * t + 0.5 * gravity * t * t;
            let scale =
                start.center.length() + start.velocity.length() * t + gravity.length() * t * t;
            assert!(
                (rod.center - center).length() <= 1e-12 * scale,
                "case {case}: centre {} vs {center}",
                rod.center
            );
            let velocity_now = start.velocity + gravity * t;
            assert!(
                (rod.velocity - velocity_now).length() <= 1e-12 * velocity_now.length().max(1.0),
                "case {case}: velocity {} vs {velocity_now}",
                rod.velocity
            );
            let angle = start.angle + start.omega * t;
            assert!(
                (rod.angle - angle).abs() <= 1e-12 * angle.abs().max(1.0),
                "case {case}: angle {} vs {angle}",
                rod.angle
            );
            // The no-gain guard may trim a roundoff's worth of energy off a free flight.
            assert!((rod.omega - start.omega).abs() <= 1e-12 * start.omega.abs().max(1.0));
        }
    }

    /// A tilted, spinning rod built to strike the floor with its lower end at a chosen time `τ` inside the step
    /// (the state at `τ` is chosen, with the lower end exactly on the floor and approaching at 1–3 m/s, and
    /// propagated back to the step start in closed form). The step must find the impact at `τ` (to 10⁻¹² s), apply
    /// SPEC §3's law there (written out here in the seed frame: `r = (a, −h)`, `c⁻ = Vy + aω`,
    /// `W = 1/m + a²/I`, `j = −(1 + e)c⁻/W`, `Vy⁺ = Vy + j/m`, `ω⁺ = ω + a j/I`, `Vx` unchanged) and fly the rest of
    /// the step ballistically. Tolerance 10⁻⁹ (m, m/s, rad): the impact state is found by bisection to 10⁻¹⁵ s
    /// and the rod is stopped just above the floor, which moves everything by far less.
    #[test]
    fn an_impact_inside_the_step_applies_the_seed_law_at_the_contact_time_and_flies_on() {
        let mut next = crate::testing::uniform(0x1_3AC7);
        for case in 0..300 {
            let h = 0.01;
            let gravity = DVec2::new(next() - 0.5, -(5.0 + 10.0 * next()));
            // Late in the step, so the bounced end (leaving at e|c⁻| ≥ 0.5 m/s) cannot come back within it.
            let tau = h * (0.6 + 0.35 * next());
            let length = 0.5 + next();
            let mass = 0.2 + 3.0 * next();
            let restitution = 0.5 + 0.5 * next();
            // The angle at impact: |sin θ| ≥ 0.4, so the other end is well clear of the floor; a whole turn is
            // added half the time.
            let side = if case % 2 == 0 { 1.0 } else { -1.0 };
            let turn = if next() < 0.5 {
                0.0
            } else {
                std::f64::consts::TAU
            };
            let angle_at = side * (0.45 + 2.25 * next()) + turn;
            let omega = 6.0 * next() - 3.0;
            let direction = DVec2::new(angle_at.cos(), angle_at.sin());
            let sigma = if direction.y < 0.0 { 1.0 } else { -1.0 };
            let r = direction * (sigma * 0.5 * length);
            let c_minus = -(1.0 + 2.0 * next());
            let vx_at = 4.0 * next() - 2.0;
            let vy_at = c_minus - omega * r.x;
            let center_at = DVec2::new(2.0 * next() - 1.0, -r.y);
            let velocity_at = DVec2::new(vx_at, vy_at);
            let mut rod = Rod {
                center: center_at - (velocity_at - gravity * tau) * tau - 0.5 * gravity * tau * tau,
                angle: angle_at - omega * tau,
                length,
                mass,
                restitution,
                velocity: velocity_at - gravity * tau,
                omega,
            };
            let report = step_rod(&mut rod, 0.0, gravity, h);
            assert_eq!(report.impacts.len(), 1, "case {case}: {report:?}");
            let impact = report.impacts[0];
            assert!(
                (impact.time - tau).abs() <= 1e-12,
                "case {case}: {} vs {tau}",
                impact.time
            );
            assert_eq!(impact.restitution_used, restitution);
            // SPEC §3 in the seed frame at the contact.
            let (a, h_seed) = (r.x, -r.y);
            let inertia = mass * length * length / 12.0;
            assert!((c_minus - (vy_at + a * omega)).abs() <= 1e-12);
            let w = 1.0 / mass + a * a / inertia;
            let jn = -(1.0 + restitution) * c_minus / w;
            let vy_plus = vy_at + jn / mass;
            let omega_plus = omega + a * jn / inertia;
            assert!(h_seed > 0.0);
            assert!(
                (impact.impulse - DVec2::new(0.0, jn)).length() <= 1e-9 * jn,
                "case {case}"
            );
            assert!((impact.normal_velocity_before - c_minus).abs() <= 1e-9);
            assert!((impact.normal_velocity_after + restitution * c_minus).abs() <= 1e-9);
            let rest = h - tau;
            let velocity_plus = DVec2::new(vx_at, vy_plus);
            let center = center_at + velocity_plus * rest + 0.5 * gravity * rest * rest;
            let velocity = velocity_plus + gravity * rest;
            let angle = angle_at + omega_plus * rest;
            assert!(
                (rod.center - center).length() <= 1e-9,
                "case {case}: {} vs {center}",
                rod.center
            );
            assert!(
                (rod.velocity - velocity).length() <= 1e-9,
                "case {case}: {} vs {velocity}",
                rod.velocity
            );
            assert!(
                (rod.omega - omega_plus).abs() <= 1e-9,
                "case {case}: ω {} vs {omega_plus}",
                rod.omega
            );
            assert!(
                (rod.angle - angle).abs() <= 1e-9,
                "case {case}: θ {} vs {angle}",
                rod.angle
            );
        }
    }

    #[test]
    fn root_search_finds_the_first_of_two_crossings() {
        // y(t) = (t − 0.3)(t − 0.6) − tiny shift: below zero on (0.3, 0.6); M = 2.
        let height = |t: f64| (t - 0.3) * (t - 0.6);
        let root = earliest_downward_crossing(&height, 2.0, 0.0, 1.0);
        assert!(root.is_some_and(|time| (time - 0.3).abs() < 1e-14 && height(time) > 0.0));
        // A dip of 1e-10 between samples is still found.
        let shallow = |t: f64| (t - 0.5) * (t - 0.5) - 1e-10;
        assert!(earliest_downward_crossing(&shallow, 2.0, 0.0, 1.0).is_some());
    }

    #[test]
    fn a_reported_angle_is_wrapped_to_minus_pi_exclusive_to_pi() {
        use std::f64::consts::{FRAC_PI_2, PI, TAU};
        // Whole turns vanish; the results are within an ulp or two of 2π's multiples, hence the tolerance.
        let cases = [
            (TAU, 0.0),
            (-19.316, -19.316 + 6.0 * PI),
            (3.0 * FRAC_PI_2, -FRAC_PI_2),
            (-3.0 * FRAC_PI_2, FRAC_PI_2),
            (0.5 + 4.0 * TAU, 0.5),
            (-1e-17, -1e-17),
        ];
        for (theta, expected) in cases {
            let wrapped = wrapped_angle(theta);
            assert!((wrapped - expected).abs() < 1e-14, "{theta}: {wrapped}");
        }
        // The interval's ends: π stays, −π becomes π.
        assert_eq!(wrapped_angle(PI), PI);
        assert_eq!(wrapped_angle(-PI), PI);
        assert!(wrapped_angle(f64::NAN).is_nan());
    }

    #[test]
    fn an_impact_names_its_end_by_the_side_it_hit_on() {
        let impact = |contact: DVec2| RodImpact {
            time: 0.0,
            end: RodEnd::Minus,
            contact_point: contact,
            center: DVec2::new(1.0, 0.5),
            impulse: DVec2::Y,
            normal_velocity_before: -1.0,
            normal_velocity_after: 0.0,
            restitution_used: 0.0,
            kinetic_energy_change: 0.0,
        };
        assert_eq!(impact(DVec2::new(0.6, 0.0)).end_words(), "left end");
        assert_eq!(impact(DVec2::new(1.4, 0.0)).end_words(), "right end");
        // A vertical rod (cos θ of π/2 is 6e-17, not 0).
        assert_eq!(
            impact(DVec2::new(1.0 + 3e-17, 0.0)).end_words(),
            "lower end"
        );
    }
}
