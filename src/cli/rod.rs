//! `contact-sandbox rod`: one rod–floor impact of seed 003 (SPEC §3) in exact rational arithmetic.
//!
//! ```text
//! contact-sandbox rod --m 1 --a 1 --h 1 --vx 0 --vy 1/2 --omega -1 --e 1/2 [--json]
//! ```
//!
//! Every number may be an integer, a decimal (`0.25`, `-1.5e-1`, converted exactly) or a fraction `p/q`.
//! The defaults are the seed's exercise 1.

use anyhow::Context;
use num_rational::BigRational;
use num_traits::ToPrimitive;
use serde_json::{Value, json};

use crate::physics::rod::{
    RodImpactInput, RodImpactReport, RodParameterError, format_fraction, parse_exact_rational,
    resolve_rod_impact,
};

use super::stdout::outln;

/// Arguments of `contact-sandbox rod` (seed frame: centre C = (0, h), lower end O = (a, 0) on the floor y = 0).
#[derive(clap::Args, Debug, Clone)]
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
            "e" => &args.e,
            _ => return error,
        };
        RodParameterError {
            value: format!("{typed:?}"),
            ..error
        }
    })?;
    Ok(input)
}

/// L = 2√(a² + h²) as f64 (the only quantity that needs a square root).
pub fn rod_length_f64(input: &RodImpactInput<BigRational>) -> f64 {
    let squared = input.a.clone() * input.a.clone() + input.h.clone() * input.h.clone();
    2.0 * squared.to_f64().unwrap_or(f64::NAN).sqrt()
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
/// plus `length` (f64, L = 2√(a² + h²)), `restitution_residual` (c⁺ + e c⁻, null when inactive) and the inputs.
pub fn rod_report_json(
    input: &RodImpactInput<BigRational>,
    report: &RodImpactReport<BigRational>,
) -> Value {
    let mut object = serde_json::Map::new();
    object.insert("active".into(), Value::Bool(report.active));
    for (name, value) in report_rows(report) {
        object.insert(name.into(), Value::String(format_fraction(value)));
    }
    object.insert("length".into(), json!(rod_length_f64(input)));
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
            "rod impact: m={} a={} h={} V=({}, {}) omega={} e={}  (L = {:.6})",
            format_fraction(&input.mass),
            format_fraction(&input.a),
            format_fraction(&input.h),
            format_fraction(&input.vx),
            format_fraction(&input.vy),
            format_fraction(&input.omega),
            format_fraction(&input.restitution),
            rod_length_f64(input),
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
            "{name:<14} {:<24} ≈ {:.9}",
            format_fraction(value),
            value.to_f64().unwrap_or(f64::NAN)
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
