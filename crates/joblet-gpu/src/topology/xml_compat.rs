//! Rewrite an hwloc 3.x topology XML into the 2.x format, so that the
//! hwloc 2.x shipped by distributions (Debian 12: 2.9) can load captures
//! exported by hwloc 3 (it refuses `version="3.0"` outright).
//!
//! The differences that matter to a 2.x importer:
//! - `<topology version="3.0">` → `version="2.0"`;
//! - OS device types became a bitmask (`osdev_type="12"` = GPU|COPROC);
//!   2.x wants one enum value;
//! - topology-wide `<info>` moved from the root object to `<topology>`;
//!   they go back into the root object here;
//! - `<pci_locality>` is new: dropped (hwloc 2 recomputes locality from
//!   the tree);
//! - objects carry an extra `id="objN"` (2.x ignores it; dropped).

use std::fmt::Write as _;

/// Why an XML could not be rewritten.
#[derive(Debug, thiserror::Error)]
pub enum XmlCompatError {
    #[error("not well-formed XML: {0}")]
    Xml(#[from] roxmltree::Error),
    #[error("the root element is <{0}>, not <topology>")]
    NotTopology(String),
}

/// The format major version an hwloc XML declares (`<topology
/// version="3.0">`); `None` for old files without one (1.x / early 2.x).
pub fn xml_format_major(xml: &str) -> Result<Option<u32>, XmlCompatError> {
    let doc = parse(xml)?;
    let root = doc.root_element();
    if root.tag_name().name() != "topology" {
        return Err(XmlCompatError::NotTopology(
            root.tag_name().name().to_string(),
        ));
    }
    Ok(root
        .attribute("version")
        .and_then(|v| v.split('.').next())
        .and_then(|m| m.trim().parse().ok()))
}

/// Rewrite a 3.x topology XML as 2.x (see the module docs).
pub fn downgrade_v3_to_v2(xml: &str) -> Result<String, XmlCompatError> {
    let doc = parse(xml)?;
    let topology = doc.root_element();
    if topology.tag_name().name() != "topology" {
        return Err(XmlCompatError::NotTopology(
            topology.tag_name().name().to_string(),
        ));
    }
    let topology_infos: Vec<roxmltree::Node> = topology
        .children()
        .filter(|n| n.is_element() && n.tag_name().name() == "info")
        .collect();

    let mut out = String::with_capacity(xml.len());
    out.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out.push_str("<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n");
    out.push_str("<topology version=\"2.0\">");
    let mut root_object_done = false;
    for child in topology.children() {
        if child.is_element() {
            match child.tag_name().name() {
                "info" | "pci_locality" => continue,
                "object" if !root_object_done => {
                    root_object_done = true;
                    write_element(&mut out, child, &topology_infos);
                    continue;
                }
                _ => {}
            }
        }
        write_node(&mut out, child);
    }
    out.push_str("</topology>\n");
    Ok(out)
}

fn parse(xml: &str) -> Result<roxmltree::Document<'_>, XmlCompatError> {
    let options = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..roxmltree::ParsingOptions::default()
    };
    Ok(roxmltree::Document::parse_with_options(xml, options)?)
}

fn write_node(out: &mut String, node: roxmltree::Node) {
    if node.is_element() {
        write_element(out, node, &[]);
    } else if node.is_text() {
        escape_into(out, node.text().unwrap_or_default(), false);
    }
}

/// Write `node`; `extra_infos` go after its own `<info>`s and before its
/// child objects (2.x wants an object's infos before its children).
fn write_element(out: &mut String, node: roxmltree::Node, extra_infos: &[roxmltree::Node]) {
    let name = node.tag_name().name();
    let is_osdev = name == "object" && node.attribute("type") == Some("OSDev");
    out.push('<');
    out.push_str(name);
    for attr in node.attributes() {
        let value = match attr.name() {
            "id" if name == "object" => continue,
            "osdev_type" if is_osdev => v2_osdev_type(attr.value()),
            _ => attr.value().to_string(),
        };
        let _ = write!(out, " {}=\"", attr.name());
        escape_into(out, &value, true);
        out.push('"');
    }
    let children: Vec<roxmltree::Node> = node.children().collect();
    if children.is_empty() && extra_infos.is_empty() {
        out.push_str("/>");
        return;
    }
    out.push('>');
    let first_object = children
        .iter()
        .position(|c| c.is_element() && c.tag_name().name() == "object")
        .unwrap_or(children.len());
    for child in &children[..first_object] {
        write_node(out, *child);
    }
    for info in extra_infos {
        write_element(out, *info, &[]);
    }
    for child in &children[first_object..] {
        write_node(out, *child);
    }
    let _ = write!(out, "</{name}>");
}

/// hwloc 3 OS device type bitmask → hwloc 2 enum (BLOCK 0, GPU 1,
/// NETWORK 2, OPENFABRICS 3, DMA 4, COPROC 5), most specific bit first.
fn v2_osdev_type(v3: &str) -> String {
    const STORAGE: u64 = 1;
    const MEMORY: u64 = 1 << 1;
    const GPU: u64 = 1 << 2;
    const COPROC: u64 = 1 << 3;
    const NETWORK: u64 = 1 << 4;
    const OPENFABRICS: u64 = 1 << 5;
    const DMA: u64 = 1 << 6;
    let Ok(bits) = v3.trim().parse::<u64>() else {
        return v3.to_string();
    };
    let v2 = if bits & OPENFABRICS != 0 {
        Some(3)
    } else if bits & COPROC != 0 {
        Some(5)
    } else if bits & NETWORK != 0 {
        Some(2)
    } else if bits & GPU != 0 {
        Some(1)
    } else if bits & DMA != 0 {
        Some(4)
    } else if bits & (STORAGE | MEMORY) != 0 {
        Some(0)
    } else {
        None
    };
    // No known bit: leave the value; 2.x keeps it as an unknown type.
    v2.map_or_else(|| v3.to_string(), |t: u8| t.to_string())
}

fn escape_into(out: &mut String, text: &str, attribute: bool) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' if attribute => out.push_str("&quot;"),
            '\n' if attribute => out.push_str("&#10;"),
            c => out.push(c),
        }
    }
}
