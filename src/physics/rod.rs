//! The rod–floor impact law of seed 003 (SPEC §3): one frictionless point impact of a uniform thin rod on the
//! fixed floor y = 0.
//!
//! Seed frame: centre C = (0, h), lower end O = (a, 0), upper end (−a, 2h), with m > 0, h > 0, a ≥ 0;
//! length L = 2√(a² + h²) and inertia I = m L²/12 = m (a² + h²)/3 (exact, no square root needed).
//! Pre-impact centre velocity (Vx, Vy), angular velocity ω (counter-clockwise positive), restitution e ∈ [0, 1];
//! r = O − C = (a, −h), floor normal n = (0, 1).
//!
//! The law is written once as the contact-Jacobian form, generic over the scalar so it runs in exact rationals
//! ([`BigRational`], nothing overflows) and in `f64`:
//!
//! ```text
//! ν = (Vx, Vy, ω),  J = (0, 1, a),  M = diag(m, m, I)
//! c⁻ = J ν⁻,  W = J M⁻¹ Jᵀ,  active only if c⁻ < 0
//! j_n = −(1 + e) c⁻ / W,   ν⁺ = ν⁻ + M⁻¹ Jᵀ j_n,   c⁺ = J ν⁺ = −e c⁻
//! ```
//!
//! The scalar closed forms of the seed (W = 1/m + a²/I, Vy⁺ = Vy + j/m, ω⁺ = ω + a j/I,
//! K⁺ − K⁻ = −(1 − e²)(c⁻)²/(2W)) are kept as separate functions so tests can compare them to the Jacobian path.
//!
//! **Mirror for a < 0.** Reflecting x → −x maps a rod whose lower end is left of the centre onto the seed frame:
//! a, Vx and ω change sign (a reflection reverses the sense of rotation), Vy and e do not. Use
//! [`RodImpactInput::mirrored`], resolve, and map back with [`RodImpactReport::mirrored`] (which flips Vx⁺, ω⁺,
//! L_O and the tip tangential speed; j_n, c, W, I and the energies are unchanged). The same formulas also hold
//! verbatim with a signed a, which is what the general-geometry entry point [`contact_impulse`] uses.

use std::fmt::Debug;
use std::ops::Neg;

use glam::DVec2;
use num_bigint::BigInt;
use num_rational::BigRational;
use num_traits::{Num, One, Zero};

/// A scalar the impact law can run in: exact [`BigRational`] or `f64`.
pub trait RodScalar: Clone + Debug + PartialOrd + Num + Neg<Output = Self> {
    /// The integer `value` as this scalar.
    fn from_i64(value: i64) -> Self;
    /// The closest `f64` (for display and for comparing the two paths).
    fn to_f64_lossy(&self) -> f64;
    /// Not NaN or infinite. Every rational is finite, however far beyond `f64`'s range.
    fn is_finite_value(&self) -> bool;
}

impl RodScalar for f64 {
    fn from_i64(value: i64) -> Self {
        value as f64
    }
    fn to_f64_lossy(&self) -> f64 {
        *self
    }
    fn is_finite_value(&self) -> bool {
        self.is_finite()
    }
}

impl RodScalar for BigRational {
    fn from_i64(value: i64) -> Self {
        BigRational::from_integer(BigInt::from(value))
    }
    fn to_f64_lossy(&self) -> f64 {
        num_traits::ToPrimitive::to_f64(self).unwrap_or(f64::NAN)
    }
    fn is_finite_value(&self) -> bool {
        true
    }
}

/// An invalid rod parameter: which one, the value as given, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid rod parameter `{parameter}` = {value}: {reason}")]
pub struct RodParameterError {
    /// The parameter's name as the CLI spells it (`m`, `a`, `h`, `vx`, `vy`, `omega`, `e`).
    pub parameter: String,
    /// The offending value as text.
    pub value: String,
    /// What is wrong with it.
    pub reason: String,
}

impl RodParameterError {
    /// An error for `parameter` with `value` and `reason`.
    pub fn new(parameter: &str, value: impl ToString, reason: &str) -> Self {
        use crate::text::abbreviate;
        // A value typed by the user may be kilobytes long; the message quotes its start (inside its quotes).
        let value = value.to_string();
        let value = match value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
            Some(inner) => format!("\"{}\"", abbreviate(inner, 64)),
            None => abbreviate(&value, 64),
        };
        Self {
            parameter: parameter.to_string(),
            value,
            reason: reason.to_string(),
        }
    }
}

/// The seed's impact problem: rod mass m, lower-end offset a, centre height h, centre velocity (Vx, Vy),
/// angular velocity ω (CCW positive) and restitution e, all in the seed frame (C = (0, h), O = (a, 0)).
#[derive(Debug, Clone, PartialEq)]
pub struct RodImpactInput<S> {
    /// m > 0, kg.
    pub mass: S,
    /// a ≥ 0: horizontal offset of the lower end O from the centre, m.
    pub a: S,
    /// h > 0: height of the centre C above the floor, m.
    pub h: S,
    /// Vx⁻, m/s.
    pub vx: S,
    /// Vy⁻, m/s.
    pub vy: S,
    /// ω⁻, rad/s, counter-clockwise positive.
    pub omega: S,
    /// e ∈ [0, 1].
    pub restitution: S,
}

impl<S: RodScalar> RodImpactInput<S> {
    /// Checks the seed's domain: m > 0, h > 0, a ≥ 0, 0 ≤ e ≤ 1 (and, in f64, that every value is finite; exact
    /// rationals are never refused for their size, since the exact law cannot overflow).
    pub fn validate(&self) -> Result<(), RodParameterError> {
        let zero = S::zero();
        let finite = |name: &str, value: &S| {
            if !value.is_finite_value() {
                Err(RodParameterError::new(
                    name,
                    format!("{value:?}"),
                    "must be a finite number",
                ))
            } else {
                Ok(())
            }
        };
        finite("m", &self.mass)?;
        finite("a", &self.a)?;
        finite("h", &self.h)?;
        finite("vx", &self.vx)?;
        finite("vy", &self.vy)?;
        finite("omega", &self.omega)?;
        finite("e", &self.restitution)?;
        if self.mass <= zero {
            return Err(RodParameterError::new(
                "m",
                format!("{:?}", self.mass),
                "mass must be > 0",
            ));
        }
        if self.h <= zero {
            return Err(RodParameterError::new(
                "h",
                format!("{:?}", self.h),
                "centre height must be > 0",
            ));
        }
        if self.a < zero {
            return Err(RodParameterError::new(
                "a",
                format!("{:?}", self.a),
                "lower-end offset must be >= 0 in the seed frame (mirror x -> -x for a < 0)",
            ));
        }
        if self.restitution < zero || self.restitution > S::one() {
            return Err(RodParameterError::new(
                "e",
                format!("{:?}", self.restitution),
                "restitution must be in [0, 1]",
            ));
        }
        Ok(())
    }

    /// The x → −x reflection of the problem: (a, Vx, ω) ↦ (−a, −Vx, −ω); m, h, Vy, e unchanged.
    pub fn mirrored(&self) -> Self {
        Self {
            a: -self.a.clone(),
            vx: -self.vx.clone(),
            omega: -self.omega.clone(),
            ..self.clone()
        }
    }
}

/// Everything the seed asks about one impact. Fields are named as in the CLI's JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct RodImpactReport<S> {
    /// c⁻ < 0: the contact approaches and the impulse is applied.
    pub active: bool,
    /// I = m (a² + h²)/3.
    pub inertia: S,
    /// W = J M⁻¹ Jᵀ = 1/m + a²/I, the inverse effective normal mass, 1/kg.
    pub w_inv_mass: S,
    /// c⁻ = J ν⁻ = Vy⁻ + a ω⁻, the contact point's normal velocity before.
    pub c_minus: S,
    /// j_n = −(1 + e) c⁻ / W on the active branch, 0 otherwise, N s.
    pub jn: S,
    /// Vx⁺ = Vx⁻ (frictionless).
    pub vx_plus: S,
    /// Vy⁺ = Vy⁻ + j_n/m.
    pub vy_plus: S,
    /// ω⁺ = ω⁻ + a j_n / I.
    pub omega_plus: S,
    /// c⁺ = J ν⁺ (= −e c⁻ on the active branch).
    pub c_plus: S,
    /// K⁻ = ½ m (Vx² + Vy²) + ½ I ω².
    pub k_minus: S,
    /// K⁺, the same with ν⁺.
    pub k_plus: S,
    /// K⁻ − K⁺ ≥ 0.
    pub energy_loss: S,
    /// L_O⁻ = I ω + m((−a) Vy − h Vx), angular momentum about the contact point O.
    pub l_o_minus: S,
    /// L_O⁺, conserved exactly (the impulse passes through O).
    pub l_o_plus: S,
    /// Vx⁻ + h ω⁻, the contact point's tangential speed before.
    pub tip_vt_minus: S,
    /// Vx⁺ + h ω⁺ (changes although the tangential impulse is 0).
    pub tip_vt_plus: S,
}

impl<S: RodScalar> RodImpactReport<S> {
    /// The report of the x → −x reflected problem: Vx⁺, ω⁺, L_O and the tip tangential speeds change sign.
    pub fn mirrored(&self) -> Self {
        Self {
            vx_plus: -self.vx_plus.clone(),
            omega_plus: -self.omega_plus.clone(),
            l_o_minus: -self.l_o_minus.clone(),
            l_o_plus: -self.l_o_plus.clone(),
            tip_vt_minus: -self.tip_vt_minus.clone(),
            tip_vt_plus: -self.tip_vt_plus.clone(),
            ..self.clone()
        }
    }

    /// The restitution residual c⁺ + e c⁻, defined only on the active branch (the seed: an inactive impact is not
    /// a failure of the restitution law).
    pub fn restitution_residual(&self, restitution: &S) -> Option<S> {
        self.active
            .then(|| self.c_plus.clone() + restitution.clone() * self.c_minus.clone())
    }
}

fn two<S: RodScalar>() -> S {
    S::from_i64(2)
}

/// I = m L²/12 = m (a² + h²)/3 for the uniform rod of the seed frame.
pub fn rod_inertia<S: RodScalar>(mass: &S, a: &S, h: &S) -> S {
    mass.clone() * (a.clone() * a.clone() + h.clone() * h.clone()) / S::from_i64(3)
}

/// J = (0, 1, a): the contact normal velocity is c = J ν = Vy + a ω.
pub fn contact_jacobian<S: RodScalar>(a: &S) -> [S; 3] {
    [S::zero(), S::one(), a.clone()]
}

/// K = ½ νᵀ M ν = ½ m (Vx² + Vy²) + ½ I ω².
pub fn kinetic_energy<S: RodScalar>(mass: &S, inertia: &S, vx: &S, vy: &S, omega: &S) -> S {
    let diagonal = [mass.clone(), mass.clone(), inertia.clone()];
    let velocity = [vx.clone(), vy.clone(), omega.clone()];
    let twice: S = diagonal
        .iter()
        .zip(velocity.iter())
        .fold(S::zero(), |sum, (mass_entry, speed)| {
            sum + mass_entry.clone() * speed.clone() * speed.clone()
        });
    twice / two()
}

/// L_O = I ω + m((−a) Vy − h Vx): angular momentum about the contact point O = (a, 0), with C − O = (−a, h).
pub fn angular_momentum_about_contact<S: RodScalar>(
    mass: &S,
    inertia: &S,
    a: &S,
    h: &S,
    vx: &S,
    vy: &S,
    omega: &S,
) -> S {
    inertia.clone() * omega.clone()
        + mass.clone() * (-(a.clone()) * vy.clone() - h.clone() * vx.clone())
}

/// Closed form W = 1/m + a²/I (the seed's scalar expression; tests compare it to J M⁻¹ Jᵀ).
pub fn inverse_effective_mass_closed_form<S: RodScalar>(mass: &S, a: &S, inertia: &S) -> S {
    S::one() / mass.clone() + a.clone() * a.clone() / inertia.clone()
}

/// Closed form j_n = −(1 + e) c⁻ / W if c⁻ < 0, else 0.
pub fn normal_impulse_closed_form<S: RodScalar>(
    restitution: &S,
    c_minus: &S,
    inverse_effective_mass: &S,
) -> S {
    if *c_minus < S::zero() {
        -(S::one() + restitution.clone()) * c_minus.clone() / inverse_effective_mass.clone()
    } else {
        S::zero()
    }
}

/// Closed form Vy⁺ = Vy⁻ + j_n/m.
pub fn vy_plus_closed_form<S: RodScalar>(vy: &S, normal_impulse: &S, mass: &S) -> S {
    vy.clone() + normal_impulse.clone() / mass.clone()
}

/// Closed form ω⁺ = ω⁻ + a j_n / I.
pub fn omega_plus_closed_form<S: RodScalar>(
    omega: &S,
    a: &S,
    normal_impulse: &S,
    inertia: &S,
) -> S {
    omega.clone() + a.clone() * normal_impulse.clone() / inertia.clone()
}

/// Closed form K⁺ − K⁻ = −(1 − e²)(c⁻)²/(2W) on the active branch (c⁻ < 0), 0 otherwise.
pub fn energy_change_closed_form<S: RodScalar>(
    restitution: &S,
    c_minus: &S,
    inverse_effective_mass: &S,
) -> S {
    if *c_minus < S::zero() {
        -(S::one() - restitution.clone() * restitution.clone()) * c_minus.clone() * c_minus.clone()
            / (two::<S>() * inverse_effective_mass.clone())
    } else {
        S::zero()
    }
}

/// Resolves one impact of the seed problem by the contact-Jacobian path (module docs), after checking the domain
/// with [`RodImpactInput::validate`].
pub fn resolve_rod_impact<S: RodScalar>(
    input: &RodImpactInput<S>,
) -> Result<RodImpactReport<S>, RodParameterError> {
    input.validate()?;
    Ok(resolve_rod_impact_by_jacobian(input))
}

/// The contact-Jacobian path without the domain check: ν⁺ = ν⁻ + M⁻¹ Jᵀ j_n with j_n = −(1 + e) J ν⁻ / (J M⁻¹ Jᵀ)
/// when J ν⁻ < 0. The formulas hold for a signed a too. Requires m > 0 and a² + h² > 0 (so I > 0); callers with
/// user input go through [`resolve_rod_impact`].
pub fn resolve_rod_impact_by_jacobian<S: RodScalar>(
    input: &RodImpactInput<S>,
) -> RodImpactReport<S> {
    let RodImpactInput {
        mass,
        a,
        h,
        vx,
        vy,
        omega,
        restitution,
    } = input;
    let inertia = rod_inertia(mass, a, h);
    let jacobian = contact_jacobian(a);
    let inverse_mass = [
        S::one() / mass.clone(),
        S::one() / mass.clone(),
        S::one() / inertia.clone(),
    ];
    let velocity_minus = [vx.clone(), vy.clone(), omega.clone()];
    let dot = |row: &[S; 3], column: &[S; 3]| {
        row.iter()
            .zip(column.iter())
            .fold(S::zero(), |sum, (x, y)| sum + x.clone() * y.clone())
    };

    let c_minus = dot(&jacobian, &velocity_minus);
    let w_inv_mass = jacobian
        .iter()
        .zip(inverse_mass.iter())
        .fold(S::zero(), |sum, (j, m_inv)| {
            sum + j.clone() * m_inv.clone() * j.clone()
        });
    let active = c_minus < S::zero();
    let jn = if active {
        -(S::one() + restitution.clone()) * c_minus.clone() / w_inv_mass.clone()
    } else {
        S::zero()
    };
    let velocity_plus: [S; 3] = std::array::from_fn(|index| {
        velocity_minus[index].clone()
            + inverse_mass[index].clone() * jacobian[index].clone() * jn.clone()
    });
    let c_plus = dot(&jacobian, &velocity_plus);
    let [vx_plus, vy_plus, omega_plus] = velocity_plus;

    let k_minus = kinetic_energy(mass, &inertia, vx, vy, omega);
    let k_plus = kinetic_energy(mass, &inertia, &vx_plus, &vy_plus, &omega_plus);
    let energy_loss = k_minus.clone() - k_plus.clone();
    let l_o_minus = angular_momentum_about_contact(mass, &inertia, a, h, vx, vy, omega);
    let l_o_plus =
        angular_momentum_about_contact(mass, &inertia, a, h, &vx_plus, &vy_plus, &omega_plus);
    let tip_vt_minus = vx.clone() + h.clone() * omega.clone();
    let tip_vt_plus = vx_plus.clone() + h.clone() * omega_plus.clone();

    RodImpactReport {
        active,
        inertia,
        w_inv_mass,
        c_minus,
        jn,
        vx_plus,
        vy_plus,
        omega_plus,
        c_plus,
        k_minus,
        k_plus,
        energy_loss,
        l_o_minus,
        l_o_plus,
        tip_vt_minus,
        tip_vt_plus,
    }
}

/// The velocity state of a planar rigid body, for the general-geometry f64 law.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlanarBody {
    /// Centre-of-mass velocity V, m/s.
    pub velocity: DVec2,
    /// ω, rad/s, counter-clockwise positive.
    pub omega: f64,
    /// m > 0, kg.
    pub mass: f64,
    /// I > 0 about the centre of mass, kg m².
    pub inertia: f64,
}

impl PlanarBody {
    /// Velocity of the body point at offset r from the centre: V + ω × r = V + ω (−r_y, r_x).
    pub fn point_velocity(&self, offset: DVec2) -> DVec2 {
        self.velocity + self.omega * offset.perp()
    }

    /// W_d = (d·d)/m + (r × d)²/I: inverse effective mass for an impulse along d applied at offset r.
    pub fn inverse_effective_mass(&self, offset: DVec2, direction: DVec2) -> f64 {
        let lever = offset.perp_dot(direction);
        direction.length_squared() / self.mass + lever * lever / self.inertia
    }

    /// Applies the impulse P at offset r: V += P/m, ω += (r × P)/I.
    pub fn apply_impulse(&mut self, offset: DVec2, impulse: DVec2) {
        self.velocity += impulse / self.mass;
        self.omega += offset.perp_dot(impulse) / self.inertia;
    }

    /// K = ½ m |V|² + ½ I ω².
    pub fn kinetic_energy(&self) -> f64 {
        0.5 * self.mass * self.velocity.length_squared()
            + 0.5 * self.inertia * self.omega * self.omega
    }
}

/// The outcome of [`contact_impulse`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContactImpulse {
    /// c⁻ < 0.
    pub active: bool,
    /// W = 1/m + (r × n)²/I (for a unit normal n).
    pub inverse_effective_mass: f64,
    /// c⁻ = n · (V + ω × r).
    pub c_minus: f64,
    /// j_n = −(1 + e) c⁻ / W if active, else 0.
    pub normal_impulse: f64,
    /// The impulse vector j_n n, N s.
    pub impulse: DVec2,
    /// c⁺ = −e c⁻ (active) or c⁻ (inactive).
    pub c_plus: f64,
    /// V⁺ = V⁻ + j_n n / m.
    pub velocity_plus: DVec2,
    /// ω⁺ = ω⁻ + (r × n) j_n / I.
    pub omega_plus: f64,
    /// K⁺ − K⁻ = −(1 − e²)(c⁻)²/(2W) ≤ 0 (computed from the velocities).
    pub energy_change: f64,
}

/// The same impact law for an arbitrary contact in f64: body velocity (V, ω), mass m, inertia I, contact offset
/// r = contact − centre, unit floor normal n, restitution e. With J = (nᵀ, r × n):
/// c⁻ = J ν, W = J M⁻¹ Jᵀ = 1/m + (r × n)²/I, j_n = −(1 + e) c⁻/W if c⁻ < 0 (else 0), ν⁺ = ν + M⁻¹ Jᵀ j_n.
/// The seed frame is the special case r = (a, −h), n = (0, 1), where r × n = a.
pub fn contact_impulse(
    body: &PlanarBody,
    contact_offset: DVec2,
    normal: DVec2,
    restitution: f64,
) -> ContactImpulse {
    let lever = contact_offset.perp_dot(normal);
    let c_minus = normal.dot(body.point_velocity(contact_offset));
    let inverse_effective_mass = body.inverse_effective_mass(contact_offset, normal);
    let active = c_minus < 0.0;
    let normal_impulse = if active {
        -(1.0 + restitution) * c_minus / inverse_effective_mass
    } else {
        0.0
    };
    let mut after = *body;
    after.velocity += normal * (normal_impulse / body.mass);
    after.omega += lever * normal_impulse / body.inertia;
    ContactImpulse {
        active,
        inverse_effective_mass,
        c_minus,
        normal_impulse,
        impulse: normal * normal_impulse,
        c_plus: normal.dot(after.point_velocity(contact_offset)),
        velocity_plus: after.velocity,
        omega_plus: after.omega,
        energy_change: after.kinetic_energy() - body.kinetic_energy(),
    }
}

/// Parses a number exactly: an integer (`-3`), a decimal with optional exponent (`0.25`, `-1.5e-1`, `.5`, `2.`),
/// or a fraction `p/q` of two such numbers. Decimals are converted exactly (0.1 is 1/10, not the nearest double).
/// Errors name `parameter` and quote `text`.
pub fn parse_exact_rational(parameter: &str, text: &str) -> Result<BigRational, RodParameterError> {
    let trimmed = text.trim();
    let fail = |reason: &str| RodParameterError::new(parameter, format!("{text:?}"), reason);
    let explain = |error: DecimalError, hint: &str| match error {
        DecimalError::NotANumber => fail(hint),
        DecimalError::OutOfRange => {
            fail("out of range (an exact decimal's order of magnitude is from -400 to 400)")
        }
    };
    if trimmed.len() > 200 {
        return Err(fail("number is too long (more than 200 characters)"));
    }
    match trimmed.split_once('/') {
        Some((numerator, denominator)) => {
            let numerator =
                parse_exact_decimal(numerator.trim()).map_err(|e| explain(e, "not a number"))?;
            let denominator =
                parse_exact_decimal(denominator.trim()).map_err(|e| explain(e, "not a number"))?;
            if denominator.is_zero() {
                return Err(fail("zero denominator"));
            }
            Ok(numerator / denominator)
        }
        None => parse_exact_decimal(trimmed).map_err(|e| {
            explain(
                e,
                "not a number (use an integer, a decimal like -1.5e-1, or a fraction p/q)",
            )
        }),
    }
}

/// Largest decimal order of magnitude accepted (its leading digit's place), so `1e999999999` cannot exhaust memory:
/// from 10^-400 to just under 10^401, however it is written (`15e-401` and `1.5e-400` alike).
const MAX_DECIMAL_EXPONENT: i64 = 400;

/// Why a decimal was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DecimalError {
    /// Not of the form `[±]digits[.digits][e[±]digits]`.
    NotANumber,
    /// Well formed, but its order of magnitude is beyond ±[`MAX_DECIMAL_EXPONENT`] (`1e1000`, `0.5e-400`).
    OutOfRange,
}

fn parse_exact_decimal(text: &str) -> Result<BigRational, DecimalError> {
    use DecimalError::{NotANumber, OutOfRange};
    let (negative, unsigned) = match text.as_bytes().first().ok_or(NotANumber)? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(index) => {
            let exponent_text = &unsigned[index + 1..];
            let digits = exponent_text
                .strip_prefix(['+', '-'])
                .unwrap_or(exponent_text);
            if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
                return Err(NotANumber);
            }
            // More than six significant digits cannot be in range, however long the mantissa (at most 200
            // characters).
            let exponent = if digits.trim_start_matches('0').len() > 6 {
                None
            } else {
                exponent_text.parse::<i64>().ok()
            };
            (&unsigned[..index], exponent)
        }
        None => (unsigned, Some(0)),
    };
    let (integer_part, fraction_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all_digits = |part: &str| part.bytes().all(|byte| byte.is_ascii_digit());
    if integer_part.is_empty() && fraction_part.is_empty() {
        return Err(NotANumber);
    }
    if !all_digits(integer_part) || !all_digits(fraction_part) {
        return Err(NotANumber);
    }
    let digits = format!("{integer_part}{fraction_part}");
    // Zero is zero whatever its exponent (`0e9999999` too).
    if digits.bytes().all(|byte| byte == b'0') {
        return Ok(BigRational::from_integer(BigInt::from(0)));
    }
    let exponent = exponent.ok_or(OutOfRange)?;
    let significand = BigInt::parse_bytes(digits.as_bytes(), 10).ok_or(NotANumber)?;
    let scale = exponent - fraction_part.len() as i64;
    // The value is significand · 10^scale; its leading digit stands at 10^order. The mantissa has at most 200
    // digits, so the power of ten computed below stays within 10^±600.
    let significant = digits.trim_start_matches('0').len() as i64;
    let order = significant - 1 + scale;
    if order.abs() > MAX_DECIMAL_EXPONENT {
        return Err(OutOfRange);
    }
    let power = num_traits::pow(BigInt::from(10), scale.unsigned_abs() as usize);
    let magnitude = if scale >= 0 {
        BigRational::from_integer(significand * power)
    } else {
        BigRational::new(significand, power)
    };
    Ok(if negative { -magnitude } else { magnitude })
}

/// `value` as a string fraction in lowest terms: "3/10", "-11/20", integers as "1".
pub fn format_fraction(value: &BigRational) -> String {
    // Ratio keeps itself reduced with a positive denominator, and prints integers without "/1".
    let reduced = value.reduced();
    if reduced.denom().is_one() {
        reduced.numer().to_string()
    } else {
        format!("{}/{}", reduced.numer(), reduced.denom())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(numerator: i64, denominator: i64) -> BigRational {
        BigRational::new(BigInt::from(numerator), BigInt::from(denominator))
    }

    #[test]
    fn f64_and_rational_paths_give_exercise_1() {
        let exact = RodImpactInput {
            mass: r(1, 1),
            a: r(1, 1),
            h: r(1, 1),
            vx: r(0, 1),
            vy: r(1, 2),
            omega: r(-1, 1),
            restitution: r(1, 2),
        };
        let float = RodImpactInput {
            mass: 1.0,
            a: 1.0,
            h: 1.0,
            vx: 0.0,
            vy: 0.5,
            omega: -1.0,
            restitution: 0.5,
        };
        let exact_report = resolve_rod_impact(&exact).map_err(|error| error.to_string());
        let float_report = resolve_rod_impact(&float).map_err(|error| error.to_string());
        assert_eq!(exact_report.map(|report| report.jn), Ok(r(3, 10)));
        assert!(float_report.is_ok_and(|report| (report.jn - 0.3).abs() < 1e-15));
    }

    #[test]
    fn decimals_convert_exactly_not_through_f64() {
        assert_eq!(parse_exact_rational("e", "0.1"), Ok(r(1, 10)));
        assert_eq!(parse_exact_rational("e", "-1.5e-1"), Ok(r(-3, 20)));
        // Leading zeros in an exponent are not significant.
        assert_eq!(parse_exact_rational("e", "1e0000001"), Ok(r(10, 1)));
        assert_eq!(parse_exact_rational("e", "25e-0000002"), Ok(r(1, 4)));
        assert_eq!(format_fraction(&r(6, -8)), "-3/4");
        assert_eq!(format_fraction(&r(4, 2)), "2");
    }

    #[test]
    fn a_refused_number_says_whether_it_is_malformed_or_out_of_range() {
        let reason = |text: &str| parse_exact_rational("m", text).map_err(|error| error.reason);
        for text in [
            "1e401",
            "1e-401",
            "0.001e404",
            "1/1e500",
            "2e9999999",
            "7e+0000000401",
        ] {
            assert!(
                reason(text).is_err_and(|r| r.starts_with("out of range")),
                "{text}: {:?}",
                reason(text)
            );
        }
        for text in [
            "1e", "abc", "1e5x", "e5", "1/x", "1e400x", "--1", "1.2.3", "",
        ] {
            assert!(
                reason(text).is_err_and(|r| r.starts_with("not a number")),
                "{text}: {:?}",
                reason(text)
            );
        }
        // The limits themselves are in range, however the number is written: the order of magnitude counts.
        for text in [
            "1e400",
            "1e-400",
            "1.5e-400",
            "15e-401",
            "0.01e402",
            "9.99e400",
            "0e999999",
            "0.00e9999999",
        ] {
            assert!(parse_exact_rational("m", text).is_ok(), "{text}");
        }
        for text in ["10e400", "0.1e-400", "1000e398"] {
            assert!(
                reason(text).is_err_and(|r| r.starts_with("out of range")),
                "{text}: {:?}",
                reason(text)
            );
        }
    }

    #[test]
    fn non_finite_float_input_is_rejected() {
        let input = RodImpactInput {
            mass: 1.0,
            a: 0.0,
            h: 1.0,
            vx: f64::NAN,
            vy: 0.0,
            omega: 0.0,
            restitution: 0.5,
        };
        assert!(input.validate().is_err_and(|error| error.parameter == "vx"));
    }
}
