//! min / median / max of a handful of samples.

#[derive(Debug, Clone, Copy)]
pub struct Summary {
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

impl Summary {
    /// `None` for no samples.
    pub fn of(samples: &[f64]) -> Option<Self> {
        let mut v: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Self {
            min: v[0],
            median,
            max: v[n - 1],
        })
    }

    pub fn json(&self, decimals: i32) -> serde_json::Value {
        let r = |x: f64| {
            let p = 10f64.powi(decimals);
            (x * p).round() / p
        };
        serde_json::json!({ "min": r(self.min), "median": r(self.median), "max": r(self.max) })
    }
}

#[cfg(test)]
mod tests;
