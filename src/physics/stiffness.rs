//! The default `d̂` and the adaptive barrier stiffness `κ` (SPEC §1.4, after ipc-toolkit's
//! `initial_barrier_stiffness` / `update_barrier_stiffness`).
//!
//! Convention: ipc-toolkit applies the barrier to **squared** distances; this crate applies it to unsigned
//! distances `d`, and uses SPEC §1.4's formulas literally in that convention:
//!
//! ```text
//! d₀    = 10⁻⁸ · diag                        (0.5 d̂ if that is not below d̂)
//! κ_min = 10¹¹ · m̄ / (4 d₀ b''(d₀, d̂)),     κ_max = 100 κ_min
//! κ     = clamp(−∇B·∇E / ‖∇B‖², κ_min, κ_max)   with ∇B the h²-scaled barrier gradient (as B enters E)
//! ```
//!
//! and doubles `κ` (up to `κ_max`) after a Newton iteration in which the closest contact distance was below
//! `10⁻⁹ · diag` and still shrinking.

use glam::DVec2;

use super::barrier::barrier_second_derivative;

/// Smallest barrier distance d̂ [m]: a nanometre is about 5·10⁶ ulps of a coordinate of 1 m, so the barrier's
/// log(d/d̂) still sees distances inside its band; at 10⁻²⁰ m the band is below one ulp and a ball stops dead
/// (pinned) the moment it enters it.
pub const MIN_DHAT: f64 = 1e-9;
/// Largest barrier distance d̂ [m]: the barrier acts across the whole band, so a d̂ of metres pushes balls
/// apart that are nowhere near touching (and at 10³⁰⁰ its energy overflows).
pub const MAX_DHAT: f64 = 1.0;

/// `d̂ = 10⁻³ × bbox diagonal`, the IPC paper's default, kept within [`MIN_DHAT`]–[`MAX_DHAT`] as a scene's own
/// d̂ must be: a floor 2 km long gave a d̂ of 2 m, and its barrier launched a ball resting 1.45 m above it.
pub fn default_dhat(bbox_diagonal: f64) -> f64 {
    (1e-3 * bbox_diagonal).clamp(MIN_DHAT, MAX_DHAT)
}

/// State of the adaptive stiffness for one lane.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdaptiveKappa {
    pub kappa_min: f64,
    pub kappa_max: f64,
    /// Distances below this count as "too close" (`10⁻⁹ · diag`).
    pub epsilon: f64,
}

impl AdaptiveKappa {
    /// Bounds from the scene size, `d̂` and the mean ball mass `m̄`.
    pub fn new(bbox_diagonal: f64, dhat: f64, mean_mass: f64) -> AdaptiveKappa {
        let mut d0 = 1e-8 * bbox_diagonal;
        if d0 >= dhat {
            d0 = 0.5 * dhat;
        }
        let kappa_min = 1e11 * mean_mass / (4.0 * d0 * barrier_second_derivative(d0, dhat));
        AdaptiveKappa {
            kappa_min,
            kappa_max: 100.0 * kappa_min,
            epsilon: 1e-9 * bbox_diagonal,
        }
    }

    /// The gradient-balance estimate `κ = −∇B·∇E/‖∇B‖²`, clamped to `[κ_min, κ_max]`; `κ_min` when no pair is
    /// within `d̂` (`∇B = 0`).
    pub fn initial(&self, barrier_gradient: &[DVec2], energy_gradient: &[DVec2]) -> f64 {
        let norm2: f64 = barrier_gradient.iter().map(|g| g.length_squared()).sum();
        if norm2 <= 0.0 {
            return self.kappa_min;
        }
        let dot: f64 = barrier_gradient
            .iter()
            .zip(energy_gradient)
            .map(|(b, e)| b.dot(*e))
            .sum();
        (-dot / norm2).clamp(self.kappa_min, self.kappa_max)
    }

    /// Doubles `κ` (capped at `κ_max`) when the closest distance is below `ε` and still shrinking.
    pub fn update(&self, previous_min_distance: f64, min_distance: f64, kappa: f64) -> f64 {
        if previous_min_distance < self.epsilon
            && min_distance < self.epsilon
            && min_distance < previous_min_distance
        {
            (2.0 * kappa).min(self.kappa_max)
        } else {
            kappa
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thousandth of the diagonal, as SPEC §1.4 says, within the range a scene's own d̂ must keep to.
    #[test]
    fn the_default_dhat_is_a_thousandth_of_the_diagonal_within_the_allowed_range() {
        assert_eq!(default_dhat(2.0), 2.0 * 1e-3);
        assert_eq!(default_dhat(999.0), 999.0 * 1e-3);
        assert_eq!(default_dhat(2000.0), MAX_DHAT);
        assert_eq!(default_dhat(1.8e6), MAX_DHAT);
        assert_eq!(default_dhat(2.9e-8), MIN_DHAT);
    }

    #[test]
    fn stiffness_bounds_follow_the_formula() {
        let a = AdaptiveKappa::new(2.0, 1e-3, 0.5);
        let d0 = 2e-8;
        let expected = 1e11 * 0.5 / (4.0 * d0 * barrier_second_derivative(d0, 1e-3));
        assert!((a.kappa_min - expected).abs() <= 1e-12 * expected);
        assert_eq!(a.kappa_max, 100.0 * a.kappa_min);
    }

    /// Random scene sizes, `d̂` and mean masses (none the spec's): `κ_min = 10¹¹ m̄ / (4 d₀ b''(d₀))` with
    /// `d₀ = 10⁻⁸ diag` and `b''` written out here from SPEC §1.2, `κ_max = 100 κ_min`, the "too close" distance
    /// `10⁻⁹ diag`, and `d̂ = 10⁻³ diag` by default. Tolerance 10⁻¹² relative (a handful of roundings).
    #[test]
    fn stiffness_bounds_match_the_spec_formula_at_random_scales() {
        let mut next = crate::testing::uniform(0x5_71FF);
        for _ in 0..1000 {
            let diagonal = 10f64.powf(-2.0 + 4.0 * next());
            let dhat = diagonal * 10f64.powf(-5.0 + 3.0 * next());
            let mean_mass = 10f64.powf(-3.0 + 5.0 * next());
            let d0 = 1e-8 * diagonal;
            let l = (d0 / dhat).ln();
            let b2 = -2.0 * l - 4.0 * (d0 - dhat) / d0 + (d0 - dhat) * (d0 - dhat) / (d0 * d0);
            let kappa_min = 1e11 * mean_mass / (4.0 * d0 * b2);
            let a = AdaptiveKappa::new(diagonal, dhat, mean_mass);
            assert!(
                (a.kappa_min - kappa_min).abs() <= 1e-12 * kappa_min,
                "κ_min {} vs {kappa_min}",
                a.kappa_min
            );
            assert!((a.kappa_max - 100.0 * kappa_min).abs() <= 1e-12 * 100.0 * kappa_min);
            assert!((a.epsilon - 1e-9 * diagonal).abs() <= 1e-15 * diagonal);
            assert!((default_dhat(diagonal) - 1e-3 * diagonal).abs() <= 1e-15 * diagonal);
        }
    }

    /// Random barrier and energy gradients: when `κ` lands strictly inside `[κ_min, κ_max]` it balances them in the
    /// least-squares sense, so the residual `κ ∇B + ∇E` is orthogonal to `∇B` (to 10⁻¹² of `|∇B| |∇E|`); when
    /// it is clamped, the unclamped balance lies beyond the bound it was clamped to (checked by the sign of
    /// `(κ ∇B + ∇E)·∇B` at the bound).
    #[test]
    fn gradient_balance_leaves_a_residual_orthogonal_to_the_barrier_gradient() {
        let mut next = crate::testing::uniform(0x0BA1_AACE);
        let a = AdaptiveKappa::new(1.0, 1e-3, 1.0);
        let (mut inside, mut clamped) = (0, 0);
        for _ in 0..2000 {
            let n = 1 + (5.0 * next()) as usize;
            let scale_b = 10f64.powf(-3.0 * next());
            let scale_e = a.kappa_min * scale_b * 10f64.powf(-1.0 + 4.0 * next());
            let mut vector = |s: f64| -> Vec<DVec2> {
                (0..n)
                    .map(|_| DVec2::new(2.0 * next() - 1.0, 2.0 * next() - 1.0) * s)
                    .collect()
            };
            let gb = vector(scale_b);
            let ge: Vec<DVec2> = vector(scale_e)
                .into_iter()
                .zip(&gb)
                .map(|(e, b)| e - *b * (a.kappa_min * 30.0))
                .collect();
            let kappa = a.initial(&gb, &ge);
            let residual_dot =
                |k: f64| -> f64 { gb.iter().zip(&ge).map(|(b, e)| (*b * k + *e).dot(*b)).sum() };
            let norm_b: f64 = gb.iter().map(|b| b.length_squared()).sum::<f64>().sqrt();
            let norm_e: f64 = ge.iter().map(|e| e.length_squared()).sum::<f64>().sqrt();
            if kappa > a.kappa_min && kappa < a.kappa_max {
                inside += 1;
                assert!(
                    residual_dot(kappa).abs() <= 1e-12 * norm_b * (norm_e + kappa * norm_b),
                    "κ = {kappa}: residual·∇B = {}",
                    residual_dot(kappa)
                );
            } else {
                clamped += 1;
                if kappa == a.kappa_min {
                    assert!(residual_dot(a.kappa_min) >= 0.0);
                } else {
                    assert_eq!(kappa, a.kappa_max);
                    assert!(residual_dot(a.kappa_max) <= 0.0);
                }
            }
        }
        assert!(
            inside > 200 && clamped > 200,
            "inside {inside}, clamped {clamped}"
        );
    }

    #[test]
    fn gradient_balance_is_clamped_and_defaults_to_the_minimum() {
        let a = AdaptiveKappa::new(1.0, 1e-3, 1.0);
        assert_eq!(a.initial(&[DVec2::ZERO], &[DVec2::X]), a.kappa_min);
        // Barrier pushes −x, inertia pulls +x: κ balances them, then clamps.
        let k = a.initial(
            &[DVec2::new(-1.0, 0.0)],
            &[DVec2::new(a.kappa_min * 3.0, 0.0)],
        );
        assert!((k - 3.0 * a.kappa_min).abs() <= 1e-9 * k);
        let k = a.initial(
            &[DVec2::new(-1.0, 0.0)],
            &[DVec2::new(a.kappa_min * 1e6, 0.0)],
        );
        assert_eq!(k, a.kappa_max);
    }

    #[test]
    fn stiffness_doubles_only_while_a_tiny_gap_keeps_shrinking() {
        let a = AdaptiveKappa::new(1.0, 1e-3, 1.0);
        let e = a.epsilon;
        assert_eq!(a.update(0.5 * e, 0.25 * e, 10.0), 20.0);
        assert_eq!(a.update(0.25 * e, 0.5 * e, 10.0), 10.0);
        assert_eq!(a.update(2.0 * e, 0.5 * e, 10.0), 10.0);
        assert_eq!(a.update(0.5 * e, 0.25 * e, a.kappa_max), a.kappa_max);
    }
}
