//! `contact-sandbox rod`: one rod–floor impact of seed 003 (SPEC §3) in exact rational arithmetic.
//!
//! ```text
//! contact-sandbox rod --m 1 --a 1 --h 1 --vx 0 --vy 1/2 --omega -1 --e 1/2 [--json]
//! ```
//!
//! Every number may be an integer, a decimal (`0.25`, `-1.5e-1`, converted exactly) or a fraction `p/q`.
//! The defaults are the seed's exercise 1. Results are exact at any size the parser accepts (10^±400); only the
//! "≈" column and the length L, which are `f64`, can leave `f64`'s range, and then they say so ([`ROD_AFTER_HELP`]).

use anyhow::Context;
use num_bigint::BigInt;
use num_rational::BigRational;
use num_traits::{One, ToPrimitive, Zero};
use serde_json::{Value, json};

use crate::physics::rod::{
    RodImpactInput, RodImpactReport, RodParameterError, format_fraction, parse_exact_rational,
    resolve_rod_impact,
};

use super::stdout::outln;

/// What `rod --help` says after the options: the number syntax and what happens beyond `f64`'s range.
pub const ROD_AFTER_HELP: &str = "\
Numbers: integers, decimals (converted exactly) or fractions p/q, each part of order of magnitude -400 to 400.
Every result is exact, whatever its size, in the table and in --json (fractions in lowest terms).
The ≈ column rounds each to f64: 9 decimals from 10^-3 to 10^6, else 10 significant digits (1.000000000e30).
A value beyond f64's range says \"beyond f64 (|x| > 1.8e308)\" or \"below f64 (0 < |x| < 2.2e-308)\" instead.
L = 2√(a² + h²) is the one result computed in f64: beyond its range the table says so and --json gives
\"length\": null; \"length_squared\" = 4(a² + h²) is always exact.";

/// Arguments of `contact-sandbox rod` (seed frame: centre C = (0, h), lower end O = (a, 0) on the floor y = 0).
#[derive(clap::Args, Debug, Clone)]
#[command(after_help = ROD_AFTER_HELP)]
pub struct RodArgs {
    /// Rod mass m > 0 (kg).
    #[arg(long, default_value = "1", allow_hyphen_values = true)]
    pub m: String,
    /// Horizontal offset a >= 0 of the lower end O = (a, 0) from the centre (m).
    #[arg(long, default_value = "1", allow_hyphen_values = true)]
    pub a: String,
    /// Height h > 0 of the centre C = (0, h) above the floor (m).
    #[arg(long, default_value = "1", allow_hyphen_values = true)]
    pub h: String,
    /// Pre-impact centre velocity Vx (m/s).
    #[arg(long, default_value = "0", allow_hyphen_values = true)]
    pub vx: String,
    /// Pre-impact centre velocity Vy (m/s).
    #[arg(long, default_value = "1/2", allow_hyphen_values = true)]
    pub vy: String,
    /// Pre-impact angular velocity ω, counter-clockwise positive (rad/s).
    #[arg(long, default_value = "-1", allow_hyphen_values = true)]
    pub omega: String,
    /// Restitution e in [0, 1], applied to the contact point's normal velocity.
    #[arg(long, default_value = "1/2", allow_hyphen_values = true)]
    pub e: String,
    /// Print one JSON object of exact fractions instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// Parses and validates the arguments into the exact problem (errors name the parameter and its value).
pub fn parse_rod_args(args: &RodArgs) -> Result<RodImpactInput<BigRational>, RodParameterError> {
    let input = RodImpactInput {
        mass: parse_exact_rational("m", &args.m)?,
        a: parse_exact_rational("a", &args.a)?,
        h: parse_exact_rational("h", &args.h)?,
        vx: parse_exact_rational("vx", &args.vx)?,
        vy: parse_exact_rational("vy", &args.vy)?,
        omega: parse_exact_rational("omega", &args.omega)?,
        restitution: parse_exact_rational("e", &args.e)?,
    };
    input.validate().map_err(|error| {
        // Quote the value as the user typed it rather than its internal form.
        let typed = match error.parameter.as_str() {
            "m" => &args.m,
            "a" => &args.a,
            "h" => &args.h,
            "vx" => &args.vx,
            "vy" => &args.vy,
            "omega" => &args.omega,
            "e" => &args.e,
            _ => return error,
        };
        RodParameterError::new(&error.parameter, format!("{typed:?}"), &error.reason)
    })?;
    Ok(input)
}

/// An exact value rounded to `f64`, or where it lies when `f64` cannot hold it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FloatApproximation {
    /// Zero, or a normal `f64`.
    Value(f64),
    /// |x| > `f64::MAX` (≈ 1.8e308).
    Beyond,
    /// 0 < |x| < `f64::MIN_POSITIVE` (≈ 2.2e-308): it would round to 0 or to a subnormal of few digits.
    Below,
}

impl FloatApproximation {
    /// `x` classified: finite normal values (and 0) are kept, the rest say which side of `f64`'s range they are.
    pub fn of(x: f64, exact_zero: bool) -> Self {
        if exact_zero {
            FloatApproximation::Value(0.0)
        } else if !x.is_finite() {
            FloatApproximation::Beyond
        } else if x.abs() < f64::MIN_POSITIVE {
            FloatApproximation::Below
        } else {
            FloatApproximation::Value(x)
        }
    }

    /// The exact `value` rounded to `f64`.
    pub fn of_exact(value: &BigRational) -> Self {
        Self::of(value.to_f64().unwrap_or(f64::INFINITY), value.is_zero())
    }

    /// `decimals` decimals from 10⁻³ to 10⁶ (and for 0), else scientific with `decimals + 1` significant digits:
    /// never more digits than an `f64` holds (`{:.9}` of 1e30 printed 1000000000000000019884624838656.0…).
    pub fn text(self, decimals: usize) -> String {
        match self {
            FloatApproximation::Value(x) if x == 0.0 || (1e-3..1e6).contains(&x.abs()) => {
                format!("{x:.decimals$}")
            }
            FloatApproximation::Value(x) => format!("{x:.decimals$e}"),
            FloatApproximation::Beyond => "beyond f64 (|x| > 1.8e308)".into(),
            FloatApproximation::Below => "below f64 (0 < |x| < 2.2e-308)".into(),
        }
    }

    /// The value for JSON: a number, or null outside `f64`'s range.
    pub fn json(self) -> Value {
        match self {
            FloatApproximation::Value(x) => json!(x),
            _ => Value::Null,
        }
    }
}

/// L² = 4(a² + h²), exact.
pub fn rod_length_squared(input: &RodImpactInput<BigRational>) -> BigRational {
    let squared = input.a.clone() * input.a.clone() + input.h.clone() * input.h.clone();
    squared * BigRational::from_integer(4.into())
}

/// L = 2√(a² + h²) in `f64` (the only quantity that needs a square root). L² is scaled by 4⁻ᵏ into `f64`'s
/// range before the root and the root by 2ᵏ after, so a = 10²⁰⁰ gives L = 2·10²⁰⁰, not ∞ from squaring in
/// `f64`; only an L itself beyond (or below) `f64`'s range is reported so.
pub fn rod_length_f64(input: &RodImpactInput<BigRational>) -> FloatApproximation {
    let squared = rod_length_squared(input);
    if squared.is_zero() {
        return FloatApproximation::Value(0.0);
    }
    // log₂ L² within ±1, halved: L² / 4ᵏ lies in [1/8, 8].
    let log2 = squared.numer().bits() as i64 - squared.denom().bits() as i64;
    let k = log2.div_euclid(2);
    let shift = (2 * k.unsigned_abs()) as usize;
    let scaled = if k >= 0 {
        squared / BigRational::from_integer(BigInt::one() << shift)
    } else {
        squared * BigRational::from_integer(BigInt::one() << shift)
    };
    let root = nearest_root(&scaled);
    // 2ᵏ as two halves, so neither overflows before the product does.
    let half = (k / 2).clamp(-2000, 2000) as i32;
    let rest = (k - i64::from(half)).clamp(-2000, 2000) as i32;
    FloatApproximation::of(root * 2f64.powi(half) * 2f64.powi(rest), false)
}

/// The `f64` nearest √s for an exact `s` in [1/8, 8]. The root of `s` rounded to `f64` first can be one ulp off
/// (a = 10³⁰⁰, h = 1 gave L = 1.9999999999999998·10³⁰⁰); of that root and its two neighbours, the one whose
/// rounding interval holds √s is kept, its ends squared exactly.
fn nearest_root(s: &BigRational) -> f64 {
    let root = s.to_f64().unwrap_or(f64::NAN).sqrt();
    let exact = |x: f64| BigRational::from_float(x);
    for candidate in [root, root.next_down(), root.next_up()] {
        let (Some(c), Some(below), Some(above)) = (
            exact(candidate),
            exact(candidate.next_down()),
            exact(candidate.next_up()),
        ) else {
            return root;
        };
        let two = BigRational::from_integer(2.into());
        let low = (&c + below) / &two;
        let high = (&c + above) / &two;
        let (low2, high2) = (&low * &low, &high * &high);
        if &low2 <= s && s <= &high2 {
            // Exactly half-way between two floats: the one with the even last bit, as IEEE rounding does.
            let neighbour = if s == &low2 {
                candidate.next_down()
            } else if s == &high2 {
                candidate.next_up()
            } else {
                return candidate;
            };
            return if candidate.to_bits() & 1 == 0 {
                candidate
            } else {
                neighbour
            };
        }
    }
    root
}

fn report_rows(report: &RodImpactReport<BigRational>) -> [(&'static str, &BigRational); 15] {
    [
        ("inertia", &report.inertia),
        ("w_inv_mass", &report.w_inv_mass),
        ("c_minus", &report.c_minus),
        ("jn", &report.jn),
        ("vx_plus", &report.vx_plus),
        ("vy_plus", &report.vy_plus),
        ("omega_plus", &report.omega_plus),
        ("c_plus", &report.c_plus),
        ("k_minus", &report.k_minus),
        ("k_plus", &report.k_plus),
        ("energy_loss", &report.energy_loss),
        ("l_o_minus", &report.l_o_minus),
        ("l_o_plus", &report.l_o_plus),
        ("tip_vt_minus", &report.tip_vt_minus),
        ("tip_vt_plus", &report.tip_vt_plus),
    ]
}

/// The JSON object of `rod --json`: every exact value as a string fraction in lowest terms, `active` as a bool,
/// plus `length` (f64, L = 2√(a² + h²), null outside `f64`'s range), `length_squared` (exact L²),
/// `restitution_residual` (c⁺ + e c⁻, null when inactive) and the inputs.
pub fn rod_report_json(
    input: &RodImpactInput<BigRational>,
    report: &RodImpactReport<BigRational>,
) -> Value {
    let mut object = serde_json::Map::new();
    object.insert("active".into(), Value::Bool(report.active));
    for (name, value) in report_rows(report) {
        object.insert(name.into(), Value::String(format_fraction(value)));
    }
    object.insert("length".into(), rod_length_f64(input).json());
    object.insert(
        "length_squared".into(),
        Value::String(format_fraction(&rod_length_squared(input))),
    );
    object.insert(
        "restitution_residual".into(),
        report
            .restitution_residual(&input.restitution)
            .map_or(Value::Null, |residual| {
                Value::String(format_fraction(&residual))
            }),
    );
    object.insert(
        "input".into(),
        json!({
            "m": format_fraction(&input.mass),
            "a": format_fraction(&input.a),
            "h": format_fraction(&input.h),
            "vx": format_fraction(&input.vx),
            "vy": format_fraction(&input.vy),
            "omega": format_fraction(&input.omega),
            "e": format_fraction(&input.restitution),
        }),
    );
    Value::Object(object)
}

/// The readable table: one quantity per line, exact value and its decimal approximation.
pub fn rod_report_table(
    input: &RodImpactInput<BigRational>,
    report: &RodImpactReport<BigRational>,
) -> String {
    let mut lines = vec![
        format!(
            "rod impact: m={} a={} h={} V=({}, {}) omega={} e={}  (L = {})",
            format_fraction(&input.mass),
            format_fraction(&input.a),
            format_fraction(&input.h),
            format_fraction(&input.vx),
            format_fraction(&input.vy),
            format_fraction(&input.omega),
            format_fraction(&input.restitution),
            rod_length_f64(input).text(6),
        ),
        format!(
            "{:<14} {}",
            "active",
            if report.active {
                "yes (c_minus < 0)"
            } else {
                "no (c_minus >= 0: nothing changes)"
            }
        ),
    ];
    for (name, value) in report_rows(report) {
        lines.push(format!(
            "{name:<14} {:<24} ≈ {}",
            format_fraction(value),
            FloatApproximation::of_exact(value).text(9)
        ));
    }
    lines.join("\n")
}

/// Runs `contact-sandbox rod`: parse exactly, resolve the impact, print the table or (`--json`) one JSON object.
pub fn run_rod(args: &RodArgs) -> anyhow::Result<()> {
    let input = parse_rod_args(args)?;
    let report = resolve_rod_impact(&input)?;
    if args.json {
        let text = serde_json::to_string_pretty(&rod_report_json(&input, &report))
            .context("writing JSON")?;
        outln!("{text}")?;
    } else {
        outln!("{}", rod_report_table(&input, &report))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_lists_every_quantity_with_its_exact_value() {
        let args = RodArgs {
            m: "1".into(),
            a: "1".into(),
            h: "1".into(),
            vx: "1".into(),
            vy: "-1".into(),
            omega: "0".into(),
            e: "1".into(),
            json: false,
        };
        let input = parse_rod_args(&args).map_err(|error| error.to_string());
        let table = input.and_then(|input| {
            resolve_rod_impact(&input)
                .map(|report| rod_report_table(&input, &report))
                .map_err(|error| error.to_string())
        });
        let table = table.unwrap_or_default();
        assert!(table.contains("jn             4/5"), "{table}");
        assert!(table.contains("tip_vt_plus    11/5"), "{table}");
    }

    /// L = 2√(a² + h²) is the `f64` nearest the exact length: rounding L²'s root twice left it one ulp low at
    /// a = 10³⁰⁰, h = 1 and at a = 3·10²⁰⁰, h = 4·10²⁰⁰.
    #[test]
    fn the_rod_length_is_the_f64_nearest_the_exact_one() {
        let length = |a: &str, h: &str| {
            let args = RodArgs {
                m: "1".into(),
                a: a.into(),
                h: h.into(),
                vx: "0".into(),
                vy: "-1".into(),
                omega: "0".into(),
                e: "1".into(),
                json: false,
            };
            let input = parse_rod_args(&args).map_err(|e| e.to_string());
            match input.map(|input| rod_length_f64(&input)) {
                Ok(FloatApproximation::Value(v)) => v,
                other => panic!("{a}, {h}: {other:?}"),
            }
        };
        assert_eq!(length("1e300", "1"), 2e300);
        assert_eq!(length("3e200", "4e200"), 1e201);
        assert_eq!(length("3", "4"), 10.0);
        assert_eq!(length("1", "1"), 2.0 * std::f64::consts::SQRT_2);
        assert_eq!(length("0.3", "0.4"), 1.0);
        assert_eq!(length("0", "1/2"), 1.0);
        // L = 1 + 3·2⁻⁵³, half-way between 1 + 2⁻⁵² and 1 + 2⁻⁵¹: the even one.
        assert_eq!(
            length("0", "9007199254740995/18014398509481984"),
            1.0 + 2f64.powi(-51)
        );
    }

    #[test]
    fn an_exponent_beyond_exact_range_is_out_of_range_not_a_non_number() {
        let rod = |m: &str| RodArgs {
            m: m.into(),
            a: "1".into(),
            h: "1".into(),
            vx: "0".into(),
            vy: "1/2".into(),
            omega: "-1".into(),
            e: "1/2".into(),
            json: false,
        };
        for m in [
            "1e1000",
            "1e-1000",
            "-2.5E+9999999",
            "1/1e500",
            "1e400/1e-401",
        ] {
            let message =
                parse_rod_args(&rod(m)).map_or_else(|e| e.to_string(), |_| "accepted".into());
            assert!(
                message.contains("`m`") && message.contains(m),
                "{m}: {message}"
            );
            assert!(message.contains("out of range"), "{m}: {message}");
        }
        for m in ["1e", "abc", "1e5x", "e5", "1/x"] {
            let message =
                parse_rod_args(&rod(m)).map_or_else(|e| e.to_string(), |_| "accepted".into());
            assert!(message.contains("not a number"), "{m}: {message}");
        }
    }
}
