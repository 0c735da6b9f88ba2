//! PCI addresses: parsing the forms profiles, captures and callers use, and NVML's two printed forms.

use std::fmt;

/// `domain:bus:device.function`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PciAddress {
    pub domain: u32,
    pub bus: u8,
    pub device: u8,
    pub function: u8,
}

impl PciAddress {
    /// Parse `[domain:]bus:device.function` in hex, any case, with a 4- or
    /// 8-digit domain (`0000:07:00.0`, `00000000:07:00.0`, `07:00.0`).
    /// Returns `None` for anything else.
    pub fn parse(raw: &str) -> Option<Self> {
        let raw = raw.trim();
        let (rest, function) = raw.rsplit_once('.')?;
        let parts: Vec<&str> = rest.split(':').collect();
        let (domain, bus, device) = match parts.as_slice() {
            [d, b, v] => (*d, *b, *v),
            [b, v] => ("0", *b, *v),
            _ => return None,
        };
        let domain = hex(domain, 8)?;
        let bus = hex(bus, 2)?;
        let device = hex(device, 2)?;
        let function = hex(function, 1)?;
        if device > 0x1f || function > 7 {
            return None;
        }
        Some(Self {
            domain,
            bus: u8::try_from(bus).ok()?,
            device: u8::try_from(device).ok()?,
            function: u8::try_from(function).ok()?,
        })
    }

    /// NVML's `busId` form: `%08X:%02X:%02X.%X` (`00000000:07:00.0`).
    pub fn nvml_bus_id(&self) -> String {
        format!(
            "{:08X}:{:02X}:{:02X}.{:X}",
            self.domain, self.bus, self.device, self.function
        )
    }

    /// NVML's `busIdLegacy` form: `%04X:%02X:%02X.%X` (`0000:07:00.0`).
    pub fn legacy_bus_id(&self) -> String {
        format!(
            "{:04X}:{:02X}:{:02X}.{:X}",
            self.domain & 0xffff,
            self.bus,
            self.device,
            self.function
        )
    }
}

impl fmt::Display for PciAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.legacy_bus_id())
    }
}

fn hex(s: &str, max_len: usize) -> Option<u32> {
    if s.is_empty() || s.len() > max_len || !s.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(s, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form_to_the_same_address() {
        let a = PciAddress::parse("0000:4E:00.0").unwrap();
        assert_eq!(PciAddress::parse("00000000:4e:00.0"), Some(a));
        assert_eq!(PciAddress::parse("4E:00.0"), Some(a));
        assert_eq!(a.bus, 0x4e);
        assert_eq!(a.nvml_bus_id(), "00000000:4E:00.0");
        assert_eq!(a.legacy_bus_id(), "0000:4E:00.0");
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            "",
            "07:00",
            "0000:07:00.8",
            "0000:07:20.0",
            "x:07:00.0",
            "0:1:2:3.0",
            "1FF:00.0",
        ] {
            assert_eq!(PciAddress::parse(bad), None, "{bad}");
        }
    }
}
