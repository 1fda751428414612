//! The distributions a mock draws its timing and lengths from, written
//! the way a user gives them on the command line: `50` (a constant),
//! `uniform:20:80`, `normal:50:10` (clamped at 0) or `exp:50` (mean).

use std::fmt;
use std::str::FromStr;

use rand::rngs::StdRng;
use rand_distr::{Distribution, Exp, Normal};

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Spread {
    Const(f64),
    Uniform(f64, f64),
    Normal { mean: f64, sd: f64 },
    Exp { mean: f64 },
}

impl Spread {
    /// One draw, never negative.
    pub fn draw(&self, rng: &mut StdRng) -> f64 {
        use rand::Rng as _;
        let x = match *self {
            Spread::Const(v) => v,
            Spread::Uniform(a, b) if b > a => rng.random_range(a..b),
            Spread::Uniform(a, _) => a,
            Spread::Normal { mean, sd } => Normal::new(mean, sd).map_or(mean, |d| d.sample(rng)),
            Spread::Exp { mean } if mean > 0.0 => {
                Exp::new(1.0 / mean).map_or(mean, |d| d.sample(rng))
            }
            Spread::Exp { mean } => mean,
        };
        x.max(0.0)
    }
}

impl FromStr for Spread {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let parts: Vec<&str> = s.split(':').collect();
        let num = |p: &str| -> Result<f64, String> {
            p.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| format!("{s:?}: {p:?} is not a non-negative number"))
        };
        match parts.as_slice() {
            [v] => Ok(Spread::Const(num(v)?)),
            ["const", v] => Ok(Spread::Const(num(v)?)),
            ["uniform", a, b] if num(a)? <= num(b)? => Ok(Spread::Uniform(num(a)?, num(b)?)),
            ["normal", m, sd] => Ok(Spread::Normal {
                mean: num(m)?,
                sd: num(sd)?,
            }),
            ["exp", m] => Ok(Spread::Exp { mean: num(m)? }),
            _ => Err(format!(
                "{s:?}: give N, const:N, uniform:LOW:HIGH, normal:MEAN:SD or exp:MEAN"
            )),
        }
    }
}

impl fmt::Display for Spread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Spread::Const(v) => write!(f, "{v}"),
            Spread::Uniform(a, b) => write!(f, "uniform:{a}:{b}"),
            Spread::Normal { mean, sd } => write!(f, "normal:{mean}:{sd}"),
            Spread::Exp { mean } => write!(f, "exp:{mean}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn spreads_parse_draw_in_range_and_refuse_nonsense() {
        let mut rng = StdRng::seed_from_u64(1);
        assert_eq!("50".parse::<Spread>().unwrap().draw(&mut rng), 50.0);
        let u: Spread = "uniform:10:20".parse().unwrap();
        assert!((0..100).all(|_| (10.0..20.0).contains(&u.draw(&mut rng))));
        let n: Spread = "normal:5:50".parse().unwrap();
        assert!((0..100).all(|_| n.draw(&mut rng) >= 0.0));
        for bad in ["", "-1", "uniform:5:1", "gamma:1", "normal:1"] {
            assert!(bad.parse::<Spread>().is_err(), "{bad}");
        }
    }
}
