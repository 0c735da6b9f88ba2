//! Capture sections for monitoring clients: board identity and modes, power, clocks, PCIe link, fan, BAR1.
//!
//! Handles the three layouts drivers have written: `<power_readings>`
//! (before R530: `power_draw`, `power_limit`, `enforced_power_limit`),
//! `<gpu_power_readings>` (R530+: `power_draw`, `current_power_limit`,
//! `requested_power_limit`) and the R535+ split of the draw into
//! `average_power_draw` (what `nvmlDeviceGetPowerUsage` reports) and
//! `instant_power_draw`.

use roxmltree::Node as XmlNode;

use super::{child, child_text, GpuReader, SmiXmlError};
use crate::model::{Bar1, Board, ClockSet, Clocks, Fan, InfoRom, Pcie, Power};
use crate::values;

impl GpuReader<'_, '_> {
    /// Text at `path`, `None` when absent or not available (`N/A`,
    /// `[Not Supported]`, `[REDACTED]`, deprecation notices).
    fn text(&self, path: &[&str]) -> Option<String> {
        let t = child_text(self.node, path)?.trim();
        let unavailable = t.is_empty()
            || t.eq_ignore_ascii_case("N/A")
            || t.starts_with('[')
            || t.starts_with("Requested functionality");
        (!unavailable).then(|| t.to_string())
    }

    pub(super) fn board(&self) -> Board {
        let flag = |path: &[&str]| self.flag(self.node, path);
        Board {
            brand: self.text(&["product_brand"]),
            serial: self.text(&["serial"]),
            board_part_number: self.text(&["board_part_number"]),
            vbios_version: self.text(&["vbios_version"]),
            inforom: InfoRom {
                image: self.text(&["inforom_version", "img_version"]),
                oem: self.text(&["inforom_version", "oem_object"]),
                ecc: self.text(&["inforom_version", "ecc_object"]),
                power: self.text(&["inforom_version", "pwr_object"]),
            },
            display_mode: flag(&["display_mode"]),
            display_active: flag(&["display_active"]),
            persistence_mode: flag(&["persistence_mode"]),
            compute_mode: self
                .text(&["compute_mode"])
                .and_then(|m| values::compute_mode(&m)),
            driver_model: self
                .text(&["driver_model", "current_dm"])
                .and_then(|m| values::driver_model(&m)),
        }
    }

    fn watts(
        &self,
        block: XmlNode<'_, '_>,
        name: &'static str,
    ) -> Result<Option<u32>, SmiXmlError> {
        match child_text(block, &[name]) {
            None => Ok(None),
            Some(t) => values::watts_as_mw(t).map_err(|r| self.bad(name, r)),
        }
    }

    pub(super) fn power(&self) -> Result<Power, SmiXmlError> {
        let Some(block) = child(self.node, &["gpu_power_readings"])
            .or_else(|| child(self.node, &["power_readings"]))
        else {
            return Ok(Power::default());
        };
        let w = |name| self.watts(block, name);
        let managed = self.flag(block, &["power_management"]).unwrap_or(true);
        let limit = |v: Option<u32>| v.filter(|_| managed);
        let draw = match w("average_power_draw")? {
            Some(v) => Some(v),
            None => match w("power_draw")? {
                Some(v) => Some(v),
                None => w("instant_power_draw")?,
            },
        };
        // Old layout: power_limit = management limit, enforced_power_limit;
        // new layout: requested_power_limit = management limit,
        // current_power_limit = enforced.
        let management = match w("requested_power_limit")? {
            Some(v) => Some(v),
            None => w("power_limit")?,
        };
        let enforced = match w("current_power_limit")? {
            Some(v) => Some(v),
            None => w("enforced_power_limit")?,
        };
        Ok(Power {
            draw_mw: draw,
            management_limit_mw: limit(management.or(enforced)),
            enforced_limit_mw: enforced,
            default_limit_mw: limit(w("default_power_limit")?),
            min_limit_mw: limit(w("min_power_limit")?),
            max_limit_mw: limit(w("max_power_limit")?),
            energy_mj: None,
        })
    }

    fn clock_set(&self, section: &'static str) -> Result<ClockSet, SmiXmlError> {
        let Some(block) = child(self.node, &[section]) else {
            return Ok(ClockSet::default());
        };
        let mhz = |name: &'static str| self.num32(block, &[name], section, "MHz");
        Ok(ClockSet {
            graphics: mhz("graphics_clock")?,
            sm: mhz("sm_clock")?,
            memory: mhz("mem_clock")?,
            video: mhz("video_clock")?,
        })
    }

    pub(super) fn clocks(&self) -> Result<Clocks, SmiXmlError> {
        Ok(Clocks {
            current: self.clock_set("clocks")?,
            max: self.clock_set("max_clocks")?,
            applications: self.clock_set("applications_clocks")?,
            default_applications: self.clock_set("default_applications_clocks")?,
            customer_boost_max: self.clock_set("max_customer_boost_clocks")?,
        })
    }

    pub(super) fn pcie(&self) -> Result<Pcie, SmiXmlError> {
        let Some(pci) = child(self.node, &["pci"]) else {
            return Ok(Pcie::default());
        };
        let link = |path: &[&str], field, unit| self.num32(pci, path, field, unit);
        Ok(Pcie {
            gen_current: link(
                &["pci_gpu_link_info", "pcie_gen", "current_link_gen"],
                "current_link_gen",
                "",
            )?,
            gen_max: link(
                &["pci_gpu_link_info", "pcie_gen", "max_link_gen"],
                "max_link_gen",
                "",
            )?,
            width_current: link(
                &["pci_gpu_link_info", "link_widths", "current_link_width"],
                "current_link_width",
                "x",
            )?,
            width_max: link(
                &["pci_gpu_link_info", "link_widths", "max_link_width"],
                "max_link_width",
                "x",
            )?,
            replay_counter: link(&["replay_counter"], "replay_counter", "")?,
            tx_kbps: link(&["tx_util"], "tx_util", "KB/s")?,
            rx_kbps: link(&["rx_util"], "rx_util", "KB/s")?,
        })
    }

    /// A capture lists one `<fan_speed>`; `N/A` means the board has no fan.
    pub(super) fn fan(&self) -> Result<Option<Fan>, SmiXmlError> {
        Ok(self
            .num32(self.node, &["fan_speed"], "fan_speed", "%")?
            .map(|speed| Fan {
                count: 1,
                speed_pct: Some(speed),
            }))
    }

    pub(super) fn performance_state(&self) -> Result<Option<u32>, SmiXmlError> {
        match child_text(self.node, &["performance_state"]) {
            None => Ok(None),
            Some(t) => values::pstate(t).map_err(|r| self.bad("performance_state", r)),
        }
    }

    pub(super) fn bar1(&self) -> Result<Option<Bar1>, SmiXmlError> {
        let Some(block) = child(self.node, &["bar1_memory_usage"]) else {
            return Ok(None);
        };
        let total = self.num(block, &["total"], "bar1_memory_usage/total", "MiB")?;
        let used = self.num(block, &["used"], "bar1_memory_usage/used", "MiB")?;
        let (Some(total), Some(used)) = (total, used) else {
            return Ok(None);
        };
        let mib = |v: u64| {
            v.checked_mul(1 << 20)
                .ok_or_else(|| self.bad("bar1_memory_usage", format!("{v} MiB overflows bytes")))
        };
        Ok(Some(Bar1 {
            total: mib(total)?,
            used: mib(used)?,
        }))
    }
}
