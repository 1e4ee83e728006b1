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

/// `d̂ = 10⁻³ × bbox diagonal`, the IPC paper's default.
pub fn default_dhat(bbox_diagonal: f64) -> f64 {
    1e-3 * bbox_diagonal
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

    #[test]
    fn stiffness_bounds_follow_the_formula() {
        let a = AdaptiveKappa::new(2.0, 1e-3, 0.5);
        let d0 = 2e-8;
        let expected = 1e11 * 0.5 / (4.0 * d0 * barrier_second_derivative(d0, 1e-3));
        assert!((a.kappa_min - expected).abs() <= 1e-12 * expected);
        assert_eq!(a.kappa_max, 100.0 * a.kappa_min);
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
