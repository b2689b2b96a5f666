//! UDT's congestion controllers on the family's trait ([`transfer::cc`]): 4.11's `CUDTCC` and
//! the SC'04 paper's variant of it ([`native`], UDT4.md §12), and the names the `udt` tool
//! knows them by.

use std::sync::Arc;

use transfer::cc::fixed_rate::FixedRate;
use transfer::cc::ControllerFactory;

use native::{NativeVariant, UdtNative};

pub mod glibc_rand;
pub mod native;

/// The controller called `name`: `udt411` (also `native`, `udt`: 4.11's CUDTCC, the
/// default), `paper` (the SC'04 variant) or `fixed:<Mbit/s>` (no congestion control, that
/// rate of full packets of `mss` bytes, FRTP-style). Any other [`ControllerFactory`] can go
/// into a `ConnectionConfig` directly.
pub fn by_name(name: &str, mss: u32) -> Result<Arc<dyn ControllerFactory>, String> {
    match name {
        "udt411" | "native" | "udt" => Ok(Arc::new(UdtNative::new(NativeVariant::Udt411))),
        "paper" => Ok(Arc::new(UdtNative::new(NativeVariant::Paper))),
        _ => {
            let rate =
                name.strip_prefix("fixed:").and_then(|r| r.parse::<f64>().ok()).filter(|r| *r > 0.0).ok_or_else(
                    || format!("unknown congestion control {name:?}: use udt411, paper or fixed:<Mbit/s>"),
                )?;
            Ok(Arc::new(FixedRate::new((mss as f64 * 8.0) / rate)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_build_their_controllers() {
        assert_eq!(by_name("udt411", 1500).unwrap().build().name(), "udt411");
        assert_eq!(by_name("udt", 1500).unwrap().build().name(), "udt411");
        assert_eq!(by_name("paper", 1500).unwrap().build().name(), "udt-paper");
        let fixed = by_name("fixed:1000", 1500).unwrap().build();
        assert_eq!((fixed.name(), fixed.pacing_period_us()), ("fixed-rate", 12.0));
        for bad in ["", "fixed:", "fixed:0", "fixed:-5", "cubic"] {
            assert!(by_name(bad, 1500).unwrap_err().contains("udt411, paper or fixed"), "{bad}");
        }
    }
}
