//! The estimate's GPU parameters and `EFIR_ESTIMATE_PARAMS`.

use super::*;

/// The GPU parameters of the estimate: the constants above by default,
/// each settable through `EFIR_ESTIMATE_PARAMS` (`name=value,...`, the
/// names of [`Model::NAMES`]) to calibrate the ranking for another GPU or
/// against measurements (`bench/gpu/estimate_points.py --params`).
#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    pub loop_trip_us: f64,
    pub dram_trip_us: f64,
    pub l2_trip_us: f64,
    pub dram_rate: f64,
    pub l2_rate: f64,
    pub matmul_rate: f64,
    pub sms: f64,
    pub resident_warps: f64,
    pub launch_us: f64,
}

impl Default for Model {
    fn default() -> Self {
        Model {
            loop_trip_us: LOOP_TRIP_US,
            dram_trip_us: DRAM_TRIP_US,
            l2_trip_us: L2_TRIP_US,
            dram_rate: DRAM_RATE,
            l2_rate: L2_RATE,
            matmul_rate: MATMUL_RATE,
            sms: SMS,
            resident_warps: RESIDENT_WARPS,
            launch_us: LAUNCH_US,
        }
    }
}

impl Model {
    /// The parameters' names in `EFIR_ESTIMATE_PARAMS`.
    pub const NAMES: [&'static str; 9] = [
        "loop_trip_us",
        "dram_trip_us",
        "l2_trip_us",
        "dram_rate",
        "l2_rate",
        "matmul_rate",
        "sms",
        "resident_warps",
        "launch_us",
    ];

    fn field(&mut self, name: &str) -> Option<&mut f64> {
        Some(match name {
            "loop_trip_us" => &mut self.loop_trip_us,
            "dram_trip_us" => &mut self.dram_trip_us,
            "l2_trip_us" => &mut self.l2_trip_us,
            "dram_rate" => &mut self.dram_rate,
            "l2_rate" => &mut self.l2_rate,
            "matmul_rate" => &mut self.matmul_rate,
            "sms" => &mut self.sms,
            "resident_warps" => &mut self.resident_warps,
            "launch_us" => &mut self.launch_us,
            _ => return None,
        })
    }

    /// The defaults with the settings of `spec` (`name=value,...`); an
    /// unknown name or a value that is not a positive number (zero for the
    /// latencies) is an error naming it.
    pub fn parse(spec: &str) -> Result<Model, String> {
        let mut m = Model::default();
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = item
                .split_once('=')
                .ok_or_else(|| format!("`{item}` is not `name=value`"))?;
            let (k, v) = (k.trim(), v.trim());
            let slot = m.field(k).ok_or_else(|| {
                format!(
                    "no estimate parameter `{k}` (known: {})",
                    Model::NAMES.join(", ")
                )
            })?;
            let x: f64 = v
                .parse()
                .map_err(|_| format!("`{v}` (for `{k}`) is not a number"))?;
            let latency = k.ends_with("_us");
            if !x.is_finite() || x < 0.0 || (x == 0.0 && !latency) {
                return Err(format!(
                    "`{k}` must be a positive number{}, not {v}",
                    if latency { " or zero" } else { "" }
                ));
            }
            *slot = x;
        }
        Ok(m)
    }
}

/// The estimate's parameters: [`Model::default`], or `EFIR_ESTIMATE_PARAMS`
/// (read once; a bad setting is reported once and the defaults kept).
pub fn model() -> &'static Model {
    static MODEL: std::sync::OnceLock<Model> = std::sync::OnceLock::new();
    MODEL.get_or_init(|| match std::env::var("EFIR_ESTIMATE_PARAMS") {
        Ok(spec) => Model::parse(&spec).unwrap_or_else(|e| {
            tracing::warn!("EFIR_ESTIMATE_PARAMS: {e}; the estimate keeps its defaults");
            Model::default()
        }),
        Err(_) => Model::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::Model;

    #[test]
    fn model_parameters_parse() {
        assert_eq!(Model::parse("").unwrap(), Model::default());
        let m = Model::parse(" loop_trip_us=0.05, sms=114 ,launch_us=0").unwrap();
        assert_eq!(m.loop_trip_us, 0.05);
        assert_eq!(m.sms, 114.0);
        assert_eq!(m.launch_us, 0.0);
        assert_eq!(m.dram_rate, Model::default().dram_rate);
        for name in Model::NAMES {
            assert!(Model::parse(&format!("{name}=1")).is_ok(), "{name}");
        }
        let e = Model::parse("bogus=1").unwrap_err();
        assert!(
            e.contains("no estimate parameter `bogus`") && e.contains("dram_trip_us"),
            "{e}"
        );
        assert!(Model::parse("sms")
            .unwrap_err()
            .contains("not `name=value`"));
        assert!(Model::parse("sms=x").unwrap_err().contains("not a number"));
        assert!(Model::parse("sms=0").unwrap_err().contains("positive"));
        assert!(Model::parse("dram_rate=-1")
            .unwrap_err()
            .contains("positive"));
        assert!(Model::parse("l2_trip_us=nan")
            .unwrap_err()
            .contains("positive"));
    }
}
