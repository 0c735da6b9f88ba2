//! Profile sections for monitoring clients: board identity and modes, power, clocks, PCIe link, fan, BAR1.
//!
//! Field names are the mock-NVML profile's (`power.current_draw_mw`,
//! `clocks.sm_current`, `pcie.replay_counter`, ...). `N/A` and absent
//! fields are "not available"; a power block with
//! `management_supported: false` has no limits.

use serde::{Deserialize, Deserializer};
use serde_norway::Value;

use super::{opt_flag, opt_u32, opt_u64};
use crate::model::{Bar1, Board, ClockSet, Clocks, Fan, InfoRom, Pcie, Power};
use crate::values;

/// A string that is absent when it is `N/A`-like (no alphanumeric content
/// or literally `N/A`).
fn opt_text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    use serde::de::Error;
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        Value::String(s) => Ok(available_text(&s)),
        Value::Number(n) => Ok(Some(n.to_string())),
        other => Err(D::Error::custom(format!(
            "expected a string, found {other:?}"
        ))),
    }
}

fn available_text(s: &str) -> Option<String> {
    let t = s.trim();
    let unavailable = t.eq_ignore_ascii_case("N/A")
        || !t.bytes().any(|b| b.is_ascii_alphanumeric())
        || t.starts_with('[');
    (!unavailable).then(|| t.to_string())
}

/// The monitoring sections of one (merged) device entry.
#[derive(Debug, Default, Deserialize)]
pub(super) struct DetailsSpec {
    #[serde(default, deserialize_with = "opt_text")]
    brand: Option<String>,
    #[serde(default, deserialize_with = "opt_text")]
    serial: Option<String>,
    #[serde(default, deserialize_with = "opt_text")]
    board_part_number: Option<String>,
    #[serde(default, deserialize_with = "opt_text")]
    vbios_version: Option<String>,
    #[serde(default)]
    inforom: InfoRomSpec,
    bar1_memory: Option<Bar1Spec>,
    #[serde(default)]
    pcie: PcieSpec,
    power: Option<PowerSpec>,
    fan: Option<FanSpec>,
    #[serde(default)]
    clocks: ClocksSpec,
    #[serde(default, deserialize_with = "opt_text")]
    performance_state: Option<String>,
    #[serde(default)]
    display: DisplaySpec,
    #[serde(default, deserialize_with = "opt_flag")]
    persistence_mode: Option<bool>,
    #[serde(default, deserialize_with = "opt_text")]
    compute_mode: Option<String>,
    #[serde(default)]
    driver_model: DriverModelSpec,
}

#[derive(Debug, Default, Deserialize)]
struct InfoRomSpec {
    #[serde(default, deserialize_with = "opt_text")]
    image_version: Option<String>,
    #[serde(default, deserialize_with = "opt_text")]
    oem_object: Option<String>,
    #[serde(default, deserialize_with = "opt_text")]
    ecc_object: Option<String>,
    #[serde(default, deserialize_with = "opt_text")]
    pwr_object: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Bar1Spec {
    #[serde(default, deserialize_with = "opt_u64")]
    total_bytes: Option<u64>,
    #[serde(default, deserialize_with = "opt_u64")]
    used_bytes: Option<u64>,
    #[serde(default, deserialize_with = "opt_u64")]
    free_bytes: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
struct PcieSpec {
    #[serde(default, deserialize_with = "opt_u32")]
    max_link_gen: Option<u32>,
    #[serde(default, deserialize_with = "opt_u32")]
    current_link_gen: Option<u32>,
    #[serde(default, deserialize_with = "opt_u32")]
    max_link_width: Option<u32>,
    #[serde(default, deserialize_with = "opt_u32")]
    current_link_width: Option<u32>,
    #[serde(default, deserialize_with = "opt_u32")]
    replay_counter: Option<u32>,
    #[serde(default, deserialize_with = "opt_u32")]
    tx_throughput_kbps: Option<u32>,
    #[serde(default, deserialize_with = "opt_u32")]
    rx_throughput_kbps: Option<u32>,
}

#[derive(Debug, Deserialize)]
struct PowerSpec {
    #[serde(default, deserialize_with = "opt_flag")]
    management_supported: Option<bool>,
    #[serde(default, deserialize_with = "opt_u32")]
    management_limit_mw: Option<u32>,
    #[serde(default, deserialize_with = "opt_u32")]
    default_limit_mw: Option<u32>,
    #[serde(default, deserialize_with = "opt_u32")]
    enforced_limit_mw: Option<u32>,
    #[serde(default, deserialize_with = "opt_u32")]
    min_limit_mw: Option<u32>,
    #[serde(default, deserialize_with = "opt_u32")]
    max_limit_mw: Option<u32>,
    #[serde(default, deserialize_with = "opt_u32")]
    current_draw_mw: Option<u32>,
    #[serde(default, deserialize_with = "opt_u64")]
    total_energy_consumption_mj: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct FanSpec {
    #[serde(default, deserialize_with = "opt_u32")]
    count: Option<u32>,
    #[serde(default, deserialize_with = "opt_u32")]
    speed_percent: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
struct ClocksSpec {
    #[serde(default, deserialize_with = "opt_u32")]
    graphics_current: Option<u32>,
    #[serde(default, deserialize_with = "opt_u32")]
    graphics_max: Option<u32>,
    #[serde(default, deserialize_with = "opt_u32")]
    graphics_app: Option<u32>,
    #[serde(default, deserialize_with = "opt_u32")]
    graphics_app_default: Option<u32>,
    #[serde(default, deserialize_with = "opt_u32")]
    graphics_boost_max: Option<u32>,
    #[serde(default, deserialize_with = "opt_u32")]
    sm_current: Option<u32>,
    #[serde(default, deserialize_with = "opt_u32")]
    sm_max: Option<u32>,
    #[serde(default, deserialize_with = "opt_u32")]
    memory_current: Option<u32>,
    #[serde(default, deserialize_with = "opt_u32")]
    memory_max: Option<u32>,
    #[serde(default, deserialize_with = "opt_u32")]
    memory_app: Option<u32>,
    #[serde(default, deserialize_with = "opt_u32")]
    memory_app_default: Option<u32>,
    #[serde(default, deserialize_with = "opt_u32")]
    video_current: Option<u32>,
    #[serde(default, deserialize_with = "opt_u32")]
    video_max: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
struct DisplaySpec {
    #[serde(default, deserialize_with = "opt_flag")]
    mode: Option<bool>,
    #[serde(default, deserialize_with = "opt_flag")]
    active: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
struct DriverModelSpec {
    #[serde(default, deserialize_with = "opt_text")]
    current: Option<String>,
}

/// The model parts a profile's monitoring sections fill.
pub(super) struct Details {
    pub board: Board,
    pub power: Power,
    pub clocks: Clocks,
    pub pcie: Pcie,
    pub fan: Option<Fan>,
    pub performance_state: Option<u32>,
    pub bar1: Option<Bar1>,
}

impl DetailsSpec {
    pub(super) fn into_details(self) -> Result<Details, String> {
        let compute_mode = match self.compute_mode {
            None => None,
            Some(m) => Some(
                values::compute_mode(&m)
                    .ok_or_else(|| format!("compute_mode `{m}` is not a compute mode"))?,
            ),
        };
        let board = Board {
            brand: self.brand,
            serial: self.serial,
            board_part_number: self.board_part_number,
            vbios_version: self.vbios_version,
            inforom: InfoRom {
                image: self.inforom.image_version,
                oem: self.inforom.oem_object,
                ecc: self.inforom.ecc_object,
                power: self.inforom.pwr_object,
            },
            display_mode: self.display.mode,
            display_active: self.display.active,
            persistence_mode: self.persistence_mode,
            compute_mode,
            driver_model: self
                .driver_model
                .current
                .as_deref()
                .and_then(values::driver_model),
        };
        let power = self.power.map_or_else(Power::default, |p| {
            let managed = p.management_supported.unwrap_or(true);
            let limit = |v: Option<u32>| v.filter(|_| managed);
            Power {
                draw_mw: p.current_draw_mw,
                management_limit_mw: limit(p.management_limit_mw.or(p.enforced_limit_mw)),
                // The driver reports the enforced limit whether or not software
                // may change it.
                enforced_limit_mw: p.enforced_limit_mw,
                default_limit_mw: limit(p.default_limit_mw),
                min_limit_mw: limit(p.min_limit_mw),
                max_limit_mw: limit(p.max_limit_mw),
                energy_mj: p.total_energy_consumption_mj,
            }
        });
        let c = self.clocks;
        let clocks = Clocks {
            current: ClockSet {
                graphics: c.graphics_current,
                sm: c.sm_current,
                memory: c.memory_current,
                video: c.video_current,
            },
            max: ClockSet {
                graphics: c.graphics_max,
                sm: c.sm_max,
                memory: c.memory_max,
                video: c.video_max,
            },
            applications: ClockSet {
                graphics: c.graphics_app,
                memory: c.memory_app,
                ..ClockSet::default()
            },
            default_applications: ClockSet {
                graphics: c.graphics_app_default,
                memory: c.memory_app_default,
                ..ClockSet::default()
            },
            customer_boost_max: ClockSet {
                graphics: c.graphics_boost_max,
                ..ClockSet::default()
            },
        };
        let pcie = Pcie {
            gen_current: self.pcie.current_link_gen,
            gen_max: self.pcie.max_link_gen,
            width_current: self.pcie.current_link_width,
            width_max: self.pcie.max_link_width,
            replay_counter: self.pcie.replay_counter,
            tx_kbps: self.pcie.tx_throughput_kbps,
            rx_kbps: self.pcie.rx_throughput_kbps,
        };
        // `count: 0` (SXM boards) or no fan block: no fan at all.
        let fan = self.fan.and_then(|f| {
            let count = f.count.unwrap_or(u32::from(f.speed_percent.is_some()));
            (count > 0).then_some(Fan {
                count,
                speed_pct: f.speed_percent,
            })
        });
        let performance_state = self
            .performance_state
            .as_deref()
            .map(values::pstate)
            .transpose()
            .map_err(|e| format!("performance_state: {e}"))?
            .flatten();
        let bar1 = match self.bar1_memory {
            Some(Bar1Spec {
                total_bytes: Some(total),
                used_bytes,
                free_bytes,
            }) => Some(Bar1 {
                total,
                used: used_bytes
                    .or_else(|| free_bytes.map(|f| total.saturating_sub(f)))
                    .unwrap_or(0),
            }),
            _ => None,
        };
        Ok(Details {
            board,
            power,
            clocks,
            pcie,
            fan,
            performance_state,
            bar1,
        })
    }
}
