//! IPC's lagged, smoothed friction (SPEC §1.5) and the penalty lane's regularised Coulomb friction.
//!
//! ```text
//! D(x) = Σ_k μ λ_k f₀(|u_k|),    u_k = t_kᵀ (Δxᵢ − Δxⱼ),   Δx = x − xᵗ
//! f₁(y) = 2y/ε_u − y²/ε_u²  (y < ε_u),  1 otherwise;     f₀(y) = y²/ε_u − y³/(3ε_u²) + ε_u/3  (y < ε_u),  y otherwise
//! ```
//!
//! `y` is measured as a **displacement over the step**, compared with `ε_u = ε_v · h` where `ε_v` [m/s] is the
//! speed below which friction is smoothed (static friction is approximated by creep slower than `ε_v`).
//! `D` enters the incremental potential as `h² D`, like `B`, so a sliding contact feels the Coulomb force `μ λ`.
//! The normal force magnitude `λ_k` and the tangent `t_k` are frozen at the start of the step (lagged): for IPC
//! `λ = −κ b'(d)`, for penalty `λ = k p`. In 2D the tangent space is one-dimensional, so `∂²D/∂u² = μ λ f₁'(|u|) ≥ 0`
//! and the friction Hessian needs no projection. Balls do not rotate: friction only slows sliding.

use glam::DVec2;

/// `f₁(y)`: the smoothed sliding fraction, `2y/ε − y²/ε²` below `ε`, 1 above.
pub fn mollifier_f1(y: f64, epsilon: f64) -> f64 {
    if y >= epsilon {
        1.0
    } else {
        let s = y / epsilon;
        s * (2.0 - s)
    }
}

/// `f₁'(y)`: `2/ε − 2y/ε²` below `ε`, 0 above.
pub fn mollifier_f1_derivative(y: f64, epsilon: f64) -> f64 {
    if y >= epsilon {
        0.0
    } else {
        2.0 / epsilon - 2.0 * y / (epsilon * epsilon)
    }
}

/// `f₀(y)`, the antiderivative of `f₁` with `f₀(ε) = ε`.
pub fn mollifier_f0(y: f64, epsilon: f64) -> f64 {
    if y >= epsilon {
        y
    } else {
        y * y / epsilon - y * y * y / (3.0 * epsilon * epsilon) + epsilon / 3.0
    }
}

/// One frozen friction contact: ball `i` against a static wall (`j = None`) or against ball `j`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FrictionContact {
    pub i: u32,
    pub j: Option<u32>,
    /// Unit tangent `t`, frozen at the step start.
    pub tangent: DVec2,
    /// `μ λ`, frozen at the step start [N].
    pub mu_lambda: f64,
}

/// The frozen friction term of one step.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FrictionTerm {
    pub contacts: Vec<FrictionContact>,
    /// `ε_u = ε_v · h` [m].
    pub epsilon: f64,
}

impl FrictionTerm {
    /// Relative tangential displacement `u = tᵀ (Δxᵢ − Δxⱼ)`.
    pub fn displacement(&self, c: &FrictionContact, x: &[DVec2], x_start: &[DVec2]) -> f64 {
        let i = c.i as usize;
        let mut relative = x[i] - x_start[i];
        if let Some(j) = c.j {
            let j = j as usize;
            relative -= x[j] - x_start[j];
        }
        c.tangent.dot(relative)
    }

    /// `D(x)`.
    pub fn energy(&self, x: &[DVec2], x_start: &[DVec2]) -> f64 {
        self.contacts
            .iter()
            .map(|c| {
                c.mu_lambda * mollifier_f0(self.displacement(c, x, x_start).abs(), self.epsilon)
            })
            .sum()
    }

    /// For each contact: `(∂D/∂u, ∂²D/∂u²)` at `x`. The gradient with respect to ball `i` is `∂D/∂u · t`
    /// (minus that for ball `j`), the Hessian `∂²D/∂u² · t tᵀ` in the pattern `[[1, −1], [−1, 1]]`.
    pub fn derivatives(&self, c: &FrictionContact, x: &[DVec2], x_start: &[DVec2]) -> (f64, f64) {
        let u = self.displacement(c, x, x_start);
        let y = u.abs();
        let first = c.mu_lambda * mollifier_f1(y, self.epsilon) * u.signum();
        let first = if u == 0.0 { 0.0 } else { first };
        let second = c.mu_lambda * mollifier_f1_derivative(y, self.epsilon);
        (first, second)
    }
}

/// The unit tangent of a contact whose distance gradient (the normal) is `n`: `n` turned 90°.
pub fn tangent_of(normal: DVec2) -> DVec2 {
    let n = normal.normalize_or_zero();
    DVec2::new(-n.y, n.x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mollifier_derivatives_match_finite_differences_and_join_continuously() {
        let eps = 1e-3;
        for y in [1e-6, 1e-4, 5e-4, 9.9e-4, 2e-3] {
            let d = 1e-9;
            let fd0 = (mollifier_f0(y + d, eps) - mollifier_f0(y - d, eps)) / (2.0 * d);
            assert!((fd0 - mollifier_f1(y, eps)).abs() < 1e-6, "f0' at {y}");
            let fd1 = (mollifier_f1(y + d, eps) - mollifier_f1(y - d, eps)) / (2.0 * d);
            assert!(
                (fd1 - mollifier_f1_derivative(y, eps)).abs() < 1e-3,
                "f1' at {y}"
            );
        }
        assert_eq!(mollifier_f0(eps, eps), eps);
        assert!((mollifier_f1(eps * (1.0 - 1e-12), eps) - 1.0).abs() < 1e-9);
        assert_eq!(mollifier_f1(0.0, eps), 0.0);
    }

    #[test]
    fn friction_derivatives_match_finite_differences_and_never_add_energy() {
        let term = FrictionTerm {
            contacts: vec![
                FrictionContact {
                    i: 0,
                    j: None,
                    tangent: DVec2::new(0.8, 0.6),
                    mu_lambda: 3.0,
                },
                FrictionContact {
                    i: 0,
                    j: Some(1),
                    tangent: DVec2::new(0.0, 1.0),
                    mu_lambda: 1.5,
                },
            ],
            epsilon: 1e-3,
        };
        let x_start = vec![DVec2::new(0.0, 0.0), DVec2::new(1.0, 0.0)];
        for x in [
            vec![DVec2::new(2e-4, -1e-4), DVec2::new(1.0, 3e-4)],
            vec![DVec2::new(2e-2, 1e-2), DVec2::new(1.0, -3e-4)],
            vec![DVec2::new(-4e-4, 1e-4), DVec2::new(1.0, 1e-5)],
        ] {
            let mut grad = [DVec2::ZERO; 2];
            for c in &term.contacts {
                let (d1, d2) = term.derivatives(c, &x, &x_start);
                grad[c.i as usize] += c.tangent * d1;
                if let Some(j) = c.j {
                    grad[j as usize] -= c.tangent * d1;
                }
                // Dissipation: the friction force opposes the relative tangential motion.
                assert!(d1 * term.displacement(c, &x, &x_start) >= 0.0);
                assert!(d2 >= 0.0);
            }
            for b in 0..2 {
                for axis in 0..2 {
                    let h = 1e-9;
                    let (mut xp, mut xm) = (x.clone(), x.clone());
                    xp[b][axis] += h;
                    xm[b][axis] -= h;
                    let fd = (term.energy(&xp, &x_start) - term.energy(&xm, &x_start)) / (2.0 * h);
                    assert!(
                        (fd - grad[b][axis]).abs() < 1e-5,
                        "dD/dx[{b}][{axis}]: {fd} vs {}",
                        grad[b][axis]
                    );
                }
            }
            // Second derivative along u by finite differences of the first.
            for c in &term.contacts {
                let h = 1e-9;
                let mut xp = x.clone();
                let mut xm = x.clone();
                xp[c.i as usize] += c.tangent * h;
                xm[c.i as usize] -= c.tangent * h;
                let fd = (term.derivatives(c, &xp, &x_start).0
                    - term.derivatives(c, &xm, &x_start).0)
                    / (2.0 * h);
                let (_, d2) = term.derivatives(c, &x, &x_start);
                assert!((fd - d2).abs() <= 1e-4 * d2.abs().max(1.0), "{fd} vs {d2}");
            }
        }
    }
}
