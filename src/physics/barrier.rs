//! The IPC log barrier (SPEC §1.2), on unsigned distances `d` (not squared distances):
//!
//! ```text
//! b(d, d̂)  = −(d − d̂)² ln(d/d̂)                       for 0 < d < d̂,  0 for d ≥ d̂,  +∞ for d ≤ 0
//! b'(d)    = −2(d − d̂) ln(d/d̂) − (d − d̂)²/d
//! b''(d)   = −2 ln(d/d̂) − 4(d − d̂)/d + (d − d̂)²/d²
//! ```

/// `b(d, d̂)`; `+∞` for `d ≤ 0` so an infeasible trial point can never lower the energy.
pub fn barrier(d: f64, dhat: f64) -> f64 {
    if d <= 0.0 {
        return f64::INFINITY;
    }
    if d >= dhat {
        return 0.0;
    }
    -(d - dhat) * (d - dhat) * (d / dhat).ln()
}

/// `b'(d, d̂)`; 0 for `d ≥ d̂`.
pub fn barrier_first_derivative(d: f64, dhat: f64) -> f64 {
    if d >= dhat {
        return 0.0;
    }
    let l = (d / dhat).ln();
    -2.0 * (d - dhat) * l - (d - dhat) * (d - dhat) / d
}

/// `b''(d, d̂)`; 0 for `d ≥ d̂`.
pub fn barrier_second_derivative(d: f64, dhat: f64) -> f64 {
    if d >= dhat {
        return 0.0;
    }
    let l = (d / dhat).ln();
    -2.0 * l - 4.0 * (d - dhat) / d + (d - dhat) * (d - dhat) / (d * d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn barrier_is_exactly_zero_at_and_beyond_dhat() {
        for dhat in [1e-5, 1e-3, 0.5] {
            for d in [dhat, dhat * 1.0000001, 2.0 * dhat, 1e9] {
                assert_eq!(barrier(d, dhat), 0.0);
                assert_eq!(barrier_first_derivative(d, dhat), 0.0);
                assert_eq!(barrier_second_derivative(d, dhat), 0.0);
            }
        }
    }

    #[test]
    fn barrier_value_and_slope_vanish_continuously_at_dhat() {
        let dhat = 1e-3;
        let d = dhat * (1.0 - 1e-7);
        assert!(barrier(d, dhat).abs() < 1e-20);
        assert!(barrier_first_derivative(d, dhat).abs() < 1e-12);
    }

    #[test]
    fn barrier_grows_without_bound_as_distance_vanishes() {
        let dhat = 1e-3;
        let mut previous = 0.0;
        for k in 4..300 {
            let d = dhat * 10f64.powf(-f64::from(k) / 4.0);
            let b = barrier(d, dhat);
            assert!(b > previous, "not increasing at d = {d}");
            previous = b;
        }
        assert!(previous > 1e-6 * 100.0);
        assert_eq!(barrier(0.0, dhat), f64::INFINITY);
        assert_eq!(barrier(-1e-9, dhat), f64::INFINITY);
    }

    #[test]
    fn barrier_derivatives_match_finite_differences() {
        for dhat in [1e-4, 1e-3, 0.2] {
            for frac in [0.001, 0.01, 0.1, 0.37, 0.8, 0.99] {
                let d = dhat * frac;
                let eps = d * 1e-6;
                let fd1 = (barrier(d + eps, dhat) - barrier(d - eps, dhat)) / (2.0 * eps);
                let b1 = barrier_first_derivative(d, dhat);
                assert!(
                    (fd1 - b1).abs() <= 1e-6 * b1.abs().max(1e-12),
                    "b' at {d}: {fd1} vs {b1}"
                );
                let fd2 = (barrier_first_derivative(d + eps, dhat)
                    - barrier_first_derivative(d - eps, dhat))
                    / (2.0 * eps);
                let b2 = barrier_second_derivative(d, dhat);
                assert!(
                    (fd2 - b2).abs() <= 1e-6 * b2.abs().max(1e-12),
                    "b'' at {d}: {fd2} vs {b2}"
                );
            }
        }
    }

    #[test]
    fn barrier_is_convex_and_repulsive_inside_its_range() {
        let dhat = 1e-3;
        for frac in [1e-6, 1e-3, 0.1, 0.5, 0.999] {
            let d = dhat * frac;
            assert!(barrier_first_derivative(d, dhat) < 0.0);
            assert!(barrier_second_derivative(d, dhat) > 0.0);
        }
    }
}
