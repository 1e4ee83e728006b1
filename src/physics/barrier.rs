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
    barrier_with_log(d, dhat, barrier_log(d, dhat))
}

/// `b'(d, d̂)`; 0 for `d ≥ d̂`.
pub fn barrier_first_derivative(d: f64, dhat: f64) -> f64 {
    if d >= dhat {
        return 0.0;
    }
    first_derivative_with_log(d, dhat, barrier_log(d, dhat))
}

/// `b''(d, d̂)`; 0 for `d ≥ d̂`.
pub fn barrier_second_derivative(d: f64, dhat: f64) -> f64 {
    if d >= dhat {
        return 0.0;
    }
    second_derivative_with_log(d, dhat, barrier_log(d, dhat))
}

/// `ln(d/d̂)`, the one transcendental function the barrier and its derivatives share. A caller that has it for
/// some `0 < d < d̂` already can pass it to the `…_with_log` forms below, which give the same bits as
/// [`barrier`], [`barrier_first_derivative`] and [`barrier_second_derivative`] there.
#[inline]
pub fn barrier_log(d: f64, dhat: f64) -> f64 {
    (d / dhat).ln()
}

/// `b(d, d̂)` for `0 < d < d̂`, given `l = ln(d/d̂)`.
#[inline]
pub fn barrier_with_log(d: f64, dhat: f64, l: f64) -> f64 {
    -(d - dhat) * (d - dhat) * l
}

/// `b'(d, d̂)` for `0 < d < d̂`, given `l = ln(d/d̂)`.
#[inline]
pub fn first_derivative_with_log(d: f64, dhat: f64, l: f64) -> f64 {
    -2.0 * (d - dhat) * l - (d - dhat) * (d - dhat) / d
}

/// `b''(d, d̂)` for `0 < d < d̂`, given `l = ln(d/d̂)`.
#[inline]
pub fn second_derivative_with_log(d: f64, dhat: f64, l: f64) -> f64 {
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

    /// `b`, `b'`, `b''` at random `d̂` (log-uniform over 10⁻⁷…10 m, none of them the spec's 1 mm) and random
    /// `d ∈ (0, d̂)`: the value against the closed form written the other way round, `(d̂ − d)² ln(d̂/d)`, and both
    /// derivatives against central differences of the function below them (`b''` also from a second difference
    /// of `b` itself, so it does not lean on `b'`). The step is `10⁻⁴ min(d, d̂ − d)`, so truncation stays near
    /// 10⁻⁸ relative at both ends of the range (near `d̂`, `b'` vanishes like `(d̂ − d)²`), and roundoff near
    /// 10⁻¹²; hence the 10⁻⁵ relative tolerance. The second difference of `b` uses a step 10× longer and gets 10⁻³.
    #[test]
    fn barrier_matches_its_closed_form_and_finite_differences_at_random_scales() {
        let mut next = crate::testing::uniform(0xB4_2217);
        for _ in 0..2000 {
            let dhat = 10f64.powf(-7.0 + 8.0 * next());
            // Fractions from 10⁻⁶ to 0.999, log-uniformly.
            let d = dhat * 10f64.powf(-6.0 * next()).min(0.999);
            let expected = (dhat - d) * (dhat - d) * (dhat / d).ln();
            let b = barrier(d, dhat);
            assert!(
                (b - expected).abs() <= 1e-12 * expected,
                "b({d}, {dhat}) = {b}, closed form {expected}"
            );
            let eps = 1e-4 * d.min(dhat - d);
            let fd1 = (barrier(d + eps, dhat) - barrier(d - eps, dhat)) / (2.0 * eps);
            let b1 = barrier_first_derivative(d, dhat);
            assert!(
                (fd1 - b1).abs() <= 1e-5 * b1.abs(),
                "b'({d}, {dhat}) = {b1}, fd {fd1}"
            );
            let fd2 = (barrier_first_derivative(d + eps, dhat)
                - barrier_first_derivative(d - eps, dhat))
                / (2.0 * eps);
            let b2 = barrier_second_derivative(d, dhat);
            assert!(
                (fd2 - b2).abs() <= 1e-5 * b2.abs(),
                "b''({d}, {dhat}) = {b2}, fd {fd2}"
            );
            let eps2 = 1e-3 * d.min(dhat - d);
            let fdd = (barrier(d + eps2, dhat) - 2.0 * b + barrier(d - eps2, dhat)) / (eps2 * eps2);
            assert!(
                (fdd - b2).abs() <= 1e-3 * b2.abs(),
                "b''({d}, {dhat}) = {b2}, second difference {fdd}"
            );
        }
    }
}
