//! Command-line style overrides of a scenario (`kvscope generate` flags, the npm package's
//! `generate` options, the web app's Compare dialog): one implementation for every front end.

use super::{HashFormat, Scenario};
use crate::order::OrderMode;

/// Which family of key order to use; the seeds come from [`Overrides`] or the scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OrderChoice {
    /// Prefix order: the proposed key-order fix (upstream vLLM from 0.34.0).
    Fixed,
    /// A seeded stand-in for set order (a permutation seeded from the scenario seed).
    Legacy,
    /// What vLLM 0.28.0-0.33.0 do: CPython 3.11 `set` order under `PYTHONHASHSEED`.
    CPython,
}

impl std::str::FromStr for OrderChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fixed" => Ok(OrderChoice::Fixed),
            "legacy" => Ok(OrderChoice::Legacy),
            "cpython" => Ok(OrderChoice::CPython),
            other => Err(format!(
                "unknown order {other:?} (expected \"fixed\", \"legacy\" or \"cpython\")"
            )),
        }
    }
}

impl std::str::FromStr for HashFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "int" => Ok(HashFormat::Int),
            "bytes" => Ok(HashFormat::Bytes),
            other => Err(format!(
                "unknown hash format {other:?} (expected \"int\" or \"bytes\")"
            )),
        }
    }
}

/// Overrides applied on top of a scenario file or built-in. `None` keeps the scenario's value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Overrides {
    /// Scenario seed; also re-seeds a `legacy` order.
    pub seed: Option<u64>,
    /// Order family.
    pub order: Option<OrderChoice>,
    /// `PYTHONHASHSEED` for the `cpython` order (kept from the scenario when not given).
    pub python_hash_seed: Option<u32>,
    /// Seed string of vLLM's `NONE_HASH`, independent of `python_hash_seed`.
    pub none_hash_seed: Option<String>,
    /// Wire hash format.
    pub hash_format: Option<HashFormat>,
}

impl Scenario {
    /// Apply `o` to this scenario.
    ///
    /// * `seed` replaces the scenario seed and the seed of a `legacy` order;
    /// * `order: cpython` takes `python_hash_seed`, else the scenario's own, else 0;
    /// * `python_hash_seed` alone changes the seed of a scenario already in `cpython` order.
    pub fn apply_overrides(&mut self, o: &Overrides) {
        if let Some(seed) = o.seed {
            self.seed = seed;
            if let OrderMode::Legacy { seed: ls } = &mut self.order {
                *ls = seed;
            }
        }
        let current_phs = match self.order {
            OrderMode::CPython { python_hash_seed } => Some(python_hash_seed),
            _ => None,
        };
        match o.order {
            Some(OrderChoice::Fixed) => self.order = OrderMode::Fixed,
            Some(OrderChoice::Legacy) => self.order = OrderMode::Legacy { seed: self.seed },
            Some(OrderChoice::CPython) => {
                self.order = OrderMode::CPython {
                    python_hash_seed: o.python_hash_seed.or(current_phs).unwrap_or(0),
                }
            }
            None => {
                if let (OrderMode::CPython { python_hash_seed }, Some(p)) =
                    (&mut self.order, o.python_hash_seed)
                {
                    *python_hash_seed = p;
                }
            }
        }
        if let Some(n) = &o.none_hash_seed {
            self.hashing.none_hash_seed = n.clone();
        }
        if let Some(f) = o.hash_format {
            self.hashing.format = f;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::builtin;

    #[test]
    fn seed_reseeds_legacy_and_cpython_keeps_its_seed_unless_given() {
        let mut s = builtin::load("single-request")
            .expect("built-in exists")
            .expect("built-in parses");
        s.apply_overrides(&Overrides {
            order: Some(OrderChoice::Legacy),
            seed: Some(9),
            ..Default::default()
        });
        assert_eq!(s.order, OrderMode::Legacy { seed: 9 });
        s.apply_overrides(&Overrides {
            order: Some(OrderChoice::CPython),
            python_hash_seed: Some(42),
            ..Default::default()
        });
        assert_eq!(
            s.order,
            OrderMode::CPython {
                python_hash_seed: 42
            }
        );
        s.apply_overrides(&Overrides {
            python_hash_seed: Some(7),
            ..Default::default()
        });
        assert_eq!(
            s.order,
            OrderMode::CPython {
                python_hash_seed: 7
            }
        );
        s.apply_overrides(&Overrides {
            order: Some(OrderChoice::Fixed),
            none_hash_seed: Some("0".into()),
            hash_format: Some(HashFormat::Bytes),
            ..Default::default()
        });
        assert_eq!(s.order, OrderMode::Fixed);
        assert_eq!(s.hashing.none_hash_seed, "0");
        assert_eq!(s.hashing.format, HashFormat::Bytes);
    }

    #[test]
    fn parse_names() {
        assert_eq!("cpython".parse::<OrderChoice>(), Ok(OrderChoice::CPython));
        assert!("set"
            .parse::<OrderChoice>()
            .unwrap_err()
            .contains("unknown order"));
        assert_eq!("bytes".parse::<HashFormat>(), Ok(HashFormat::Bytes));
        assert!("hex".parse::<HashFormat>().is_err());
    }
}
