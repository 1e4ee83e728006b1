//! Penalty contact (SPEC §1.1): `½ k p²` per overlapping pair with penetration depth `p = max(0, −d)`.
//!
//! `d` is the signed surface distance of [`crate::physics::geometry`]; inside a wall it measures to the
//! nearest face, so a ball that lands past a wall's mid-plane is pushed out of the back (the seed's 2 m/s case).

/// Penetration depth `p = max(0, −d)`.
pub fn penetration(d: f64) -> f64 {
    if d < 0.0 { -d } else { 0.0 }
}

/// `½ k p²`.
pub fn penalty_energy(d: f64, stiffness: f64) -> f64 {
    let p = penetration(d);
    0.5 * stiffness * p * p
}

/// `∂/∂d ½ k p² = −k p` (0 when not overlapping).
pub fn penalty_first_derivative(d: f64, stiffness: f64) -> f64 {
    -stiffness * penetration(d)
}

/// `∂²/∂d² ½ k p² = k` while overlapping, else 0.
pub fn penalty_second_derivative(d: f64, stiffness: f64) -> f64 {
    if d < 0.0 { stiffness } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_overlaps_produce_force() {
        assert_eq!(penalty_energy(1e-9, 1e6), 0.0);
        assert_eq!(penalty_first_derivative(0.0, 1e6), 0.0);
        assert_eq!(penalty_second_derivative(0.0, 1e6), 0.0);
        assert!(penalty_first_derivative(-1e-3, 1e4) < 0.0);
    }

    #[test]
    fn penalty_derivatives_match_finite_differences() {
        let k = 1e4;
        for d in [-0.2, -1e-3, -1e-6] {
            let eps = 1e-9;
            let fd1 = (penalty_energy(d + eps, k) - penalty_energy(d - eps, k)) / (2.0 * eps);
            assert!((fd1 - penalty_first_derivative(d, k)).abs() < 1e-4 * k * d.abs().max(1e-6));
            let fd2 = (penalty_first_derivative(d + eps, k) - penalty_first_derivative(d - eps, k))
                / (2.0 * eps);
            assert!((fd2 - penalty_second_derivative(d, k)).abs() < 1e-6 * k);
        }
    }

    /// Random stiffness (log-uniform 10⁰…10¹⁰ N/m) and signed distances on both sides of contact: the energy is
    /// `½ k p²` with `p` the overlap, computed here as `½ k d²` for `d < 0` and 0 otherwise; the first derivative
    /// is the central difference of the energy (exact for a quadratic up to roundoff, ~10⁻⁹ relative with a step
    /// of 10⁻⁴ |d|), and the second is `k` on overlaps and 0 elsewhere.
    #[test]
    fn penalty_energy_is_half_k_p_squared_with_matching_derivatives_at_random_stiffness() {
        let mut next = crate::testing::uniform(0x9E_4A17);
        for _ in 0..2000 {
            let k = 10f64.powf(10.0 * next());
            let d = (2.0 * next() - 1.0) * 10f64.powf(-6.0 + 5.0 * next());
            let expected = if d < 0.0 { 0.5 * k * d * d } else { 0.0 };
            let e = penalty_energy(d, k);
            assert!(
                (e - expected).abs() <= 1e-14 * expected,
                "E({d}, {k}) = {e}, expected {expected}"
            );
            let eps = 1e-4 * d.abs();
            let fd1 = (penalty_energy(d + eps, k) - penalty_energy(d - eps, k)) / (2.0 * eps);
            let e1 = penalty_first_derivative(d, k);
            assert!(
                (fd1 - e1).abs() <= 1e-9 * k * d.abs(),
                "E'({d}, {k}) = {e1}, fd {fd1}"
            );
            assert_eq!(
                penalty_second_derivative(d, k),
                if d < 0.0 { k } else { 0.0 },
                "E''({d}, {k})"
            );
        }
    }
}
