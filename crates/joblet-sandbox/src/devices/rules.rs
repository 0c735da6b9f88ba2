//! Device rules and the allow-list they form: parsing/printing in the cgroup
//! v1 syntax (`c 195:0 rw`), normalisation to what the kernel stores, and the
//! pure `allows` decision both kernel back ends are checked against.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::DeviceError;

/// The kind of device node a rule or request is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceType {
    /// Character devices (`c`).
    Char,
    /// Block devices (`b`).
    Block,
    /// Both (`a`). In a rule: character and block devices. In a request
    /// to [`DeviceRules::allows`]: allowed only if allowed as both.
    All,
}

impl DeviceType {
    /// The one-letter form used by cgroup v1 (`c`, `b`, `a`).
    pub fn as_char(self) -> char {
        match self {
            DeviceType::Char => 'c',
            DeviceType::Block => 'b',
            DeviceType::All => 'a',
        }
    }
}

/// Which operations on a device node: a subset of `rwm`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Access {
    /// Open for reading.
    pub read: bool,
    /// Open for writing.
    pub write: bool,
    /// Create the node with mknod(2).
    pub mknod: bool,
}

impl Access {
    /// No access at all.
    pub const NONE: Access = Access {
        read: false,
        write: false,
        mknod: false,
    };
    /// `r`
    pub const R: Access = Access {
        read: true,
        write: false,
        mknod: false,
    };
    /// `w`
    pub const W: Access = Access {
        read: false,
        write: true,
        mknod: false,
    };
    /// `m`
    pub const M: Access = Access {
        read: false,
        write: false,
        mknod: true,
    };
    /// `rw`: open, but not create nodes.
    pub const RW: Access = Access {
        read: true,
        write: true,
        mknod: false,
    };
    /// `rwm`: everything.
    pub const RWM: Access = Access {
        read: true,
        write: true,
        mknod: true,
    };

    /// Kernel access bit for mknod in `bpf_cgroup_dev_ctx` (`BPF_DEVCG_ACC_MKNOD`).
    pub const BPF_MKNOD: u32 = 1;
    /// `BPF_DEVCG_ACC_READ`
    pub const BPF_READ: u32 = 2;
    /// `BPF_DEVCG_ACC_WRITE`
    pub const BPF_WRITE: u32 = 4;

    /// Parses a non-empty subset of `rwm` in any order, each letter once.
    pub fn parse(s: &str) -> Result<Access, DeviceError> {
        let err = || DeviceError::Parse {
            input: s.to_owned(),
            expected: "access: a non-empty subset of \"rwm\", each letter at most once",
        };
        if s.is_empty() {
            return Err(err());
        }
        let mut access = Access::NONE;
        for c in s.chars() {
            let bit = match c {
                'r' => &mut access.read,
                'w' => &mut access.write,
                'm' => &mut access.mknod,
                _ => return Err(err()),
            };
            if *bit {
                return Err(err());
            }
            *bit = true;
        }
        Ok(access)
    }

    /// True if no operation is allowed.
    pub fn is_empty(self) -> bool {
        self == Access::NONE
    }

    /// True if every operation in `other` is also in `self`.
    pub fn contains(self, other: Access) -> bool {
        (other.bpf_bits() & !self.bpf_bits()) == 0
    }

    /// Operations in either.
    pub fn union(self, other: Access) -> Access {
        Access {
            read: self.read || other.read,
            write: self.write || other.write,
            mknod: self.mknod || other.mknod,
        }
    }

    /// The bits of `bpf_cgroup_dev_ctx.access_type >> 16` (MKNOD=1 READ=2 WRITE=4).
    pub fn bpf_bits(self) -> u32 {
        (if self.mknod { Self::BPF_MKNOD } else { 0 })
            | (if self.read { Self::BPF_READ } else { 0 })
            | (if self.write { Self::BPF_WRITE } else { 0 })
    }

    /// The inverse of [`Access::bpf_bits`]; other bits are ignored.
    pub fn from_bpf_bits(bits: u32) -> Access {
        Access {
            read: bits & Self::BPF_READ != 0,
            write: bits & Self::BPF_WRITE != 0,
            mknod: bits & Self::BPF_MKNOD != 0,
        }
    }
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (on, c) in [(self.read, 'r'), (self.write, 'w'), (self.mknod, 'm')] {
            if on {
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}

impl FromStr for Access {
    type Err = DeviceError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Access::parse(s)
    }
}

impl TryFrom<String> for Access {
    type Error = DeviceError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Access::parse(&s)
    }
}

impl From<Access> for String {
    fn from(a: Access) -> String {
        a.to_string()
    }
}

/// One allow rule: `kind major:minor access`; `None` is the wildcard `*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DeviceRule {
    /// Character, block or both.
    pub kind: DeviceType,
    /// Major number, `None` = any.
    pub major: Option<u32>,
    /// Minor number, `None` = any.
    pub minor: Option<u32>,
    /// What the rule allows.
    pub access: Access,
}

/// The kernel's encoding of `*` in v1 (`~0`): a rule naming this number
/// would be read back as a wildcard, so it is refused.
const KERNEL_WILDCARD: u32 = u32::MAX;

impl DeviceRule {
    /// A character device `c major:minor access`.
    pub fn char(major: u32, minor: u32, access: Access) -> Self {
        DeviceRule {
            kind: DeviceType::Char,
            major: Some(major),
            minor: Some(minor),
            access,
        }
    }

    /// A block device `b major:minor access`.
    pub fn block(major: u32, minor: u32, access: Access) -> Self {
        DeviceRule {
            kind: DeviceType::Block,
            major: Some(major),
            minor: Some(minor),
            access,
        }
    }

    /// The cgroup v1 syntax, e.g. `c 195:0 rw`, `c 136:* rw`, `a *:* rwm`.
    /// Note that cgroup v1 reads any line starting with `a` as "all devices";
    /// [`DeviceRules`] therefore never stores `All` rules (see
    /// [`DeviceRules::allow`]).
    pub fn to_v1_line(&self) -> String {
        fn num(n: Option<u32>) -> String {
            n.map_or_else(|| "*".to_owned(), |n| n.to_string())
        }
        format!(
            "{} {}:{} {}",
            self.kind.as_char(),
            num(self.major),
            num(self.minor),
            self.access
        )
    }

    /// Parses the syntax printed by [`DeviceRule::to_v1_line`] (and by
    /// cgroup v1 `devices.list`). A bare `a` means `a *:* rwm`.
    pub fn parse(s: &str) -> Result<Self, DeviceError> {
        let err = |expected| DeviceError::Parse {
            input: s.to_owned(),
            expected,
        };
        let fields: Vec<&str> = s.split_whitespace().collect();
        if fields == ["a"] {
            return Ok(DeviceRule {
                kind: DeviceType::All,
                major: None,
                minor: None,
                access: Access::RWM,
            });
        }
        let [kind, numbers, access] = fields[..] else {
            return Err(err(
                "three fields: TYPE MAJOR:MINOR ACCESS, e.g. \"c 195:0 rw\"",
            ));
        };
        let kind = match kind {
            "c" => DeviceType::Char,
            "b" => DeviceType::Block,
            "a" => DeviceType::All,
            _ => return Err(err("TYPE to be c, b or a")),
        };
        let Some((major, minor)) = numbers.split_once(':') else {
            return Err(err("MAJOR:MINOR, each a number or *"));
        };
        let number = |n: &str| -> Result<Option<u32>, DeviceError> {
            if n == "*" {
                return Ok(None);
            }
            if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
                return Err(err("MAJOR and MINOR to be decimal numbers or *"));
            }
            match n.parse::<u32>() {
                Ok(KERNEL_WILDCARD) | Err(_) => Err(err("MAJOR and MINOR below 4294967295")),
                Ok(v) => Ok(Some(v)),
            }
        };
        let access = Access::parse(access).map_err(|_| {
            err("ACCESS to be a non-empty subset of \"rwm\", each letter at most once")
        })?;
        Ok(DeviceRule {
            kind,
            major: number(major)?,
            minor: number(minor)?,
            access,
        })
    }

    /// Whether the rule names one device: a type, a major and a minor
    /// (no wildcard).
    pub fn is_exact(&self) -> bool {
        self.kind != DeviceType::All && self.major.is_some() && self.minor.is_some()
    }

    /// Whether this one rule allows the request (`kind` must be Char or
    /// Block): type, major and minor match and `access` is a subset.
    pub(crate) fn matches(&self, kind: DeviceType, major: u32, minor: u32, access: Access) -> bool {
        (self.kind == DeviceType::All || self.kind == kind)
            && self.major.is_none_or(|m| m == major)
            && self.minor.is_none_or(|m| m == minor)
            && self.access.contains(access)
    }
}

impl fmt::Display for DeviceRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_v1_line())
    }
}

impl FromStr for DeviceRule {
    type Err = DeviceError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DeviceRule::parse(s)
    }
}

/// An allow-list: everything not listed is denied.
///
/// The list is kept in the form the kernel stores (cgroup v1's exception
/// list), so that v1, the v2 program and [`DeviceRules::allows`] agree:
/// `All` rules are split into a `Block` and a `Char` rule, rules for the same
/// `(kind, major, minor)` are merged by OR-ing their access, rules with no
/// access and rules naming major or minor `4294967295` (v1's encoding of `*`,
/// no real device has it) are dropped rather than widened.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "RawRules")]
pub struct DeviceRules {
    rules: Vec<DeviceRule>,
}

/// The serialised shape, normalised on the way in.
#[derive(Deserialize)]
struct RawRules {
    rules: Vec<DeviceRule>,
}

impl From<RawRules> for DeviceRules {
    fn from(raw: RawRules) -> Self {
        let mut rules = DeviceRules::deny_all();
        for rule in raw.rules {
            rules.allow(rule);
        }
        rules
    }
}

impl DeviceRules {
    /// No device at all.
    pub fn deny_all() -> Self {
        DeviceRules { rules: Vec::new() }
    }

    /// The minimal /dev every job gets, `rw` without mknod: null 1:3,
    /// zero 1:5, full 1:7, random 1:8, urandom 1:9, tty 5:0, ptmx 5:2 and
    /// the pseudo-terminals 136:*.
    pub fn minimal() -> Self {
        let mut rules = DeviceRules::deny_all();
        for (major, minor) in [(1, 3), (1, 5), (1, 7), (1, 8), (1, 9), (5, 0), (5, 2)] {
            rules.allow(DeviceRule::char(major, minor, Access::RW));
        }
        rules.allow(DeviceRule {
            kind: DeviceType::Char,
            major: Some(136),
            minor: None,
            access: Access::RW,
        });
        rules
    }

    /// Adds a rule (normalised as described on [`DeviceRules`]).
    pub fn allow(&mut self, rule: DeviceRule) -> &mut Self {
        if rule.access.is_empty() {
            tracing::debug!(rule = %rule, "device rule allows nothing; dropped");
            return self;
        }
        if rule.major == Some(KERNEL_WILDCARD) || rule.minor == Some(KERNEL_WILDCARD) {
            tracing::warn!(
                rule = %rule,
                "device number 4294967295 is the kernel's wildcard and names no device; rule dropped"
            );
            return self;
        }
        match rule.kind {
            DeviceType::All => {
                self.merge(DeviceRule {
                    kind: DeviceType::Block,
                    ..rule
                });
                self.merge(DeviceRule {
                    kind: DeviceType::Char,
                    ..rule
                });
            }
            DeviceType::Char | DeviceType::Block => self.merge(rule),
        }
        self
    }

    fn merge(&mut self, rule: DeviceRule) {
        match self
            .rules
            .iter_mut()
            .find(|r| r.kind == rule.kind && r.major == rule.major && r.minor == rule.minor)
        {
            Some(existing) => existing.access = existing.access.union(rule.access),
            None => self.rules.push(rule),
        }
    }

    /// The normalised rules, in the order first added.
    pub fn rules(&self) -> &[DeviceRule] {
        &self.rules
    }

    /// The rules to add to `self` (a filter already applied) so that it
    /// allows exactly `wider`, when that can be done by adding exact device
    /// rules (`c 195:3 rw`: type, major and minor all named) and nothing
    /// else: every rule of `self` has one of the same type, major and minor
    /// in `wider` allowing at least as much, and every rule of `wider` that
    /// is not also in `self` unchanged is exact. `None` otherwise (the
    /// filter must then be replaced, not extended).
    ///
    /// Adding the returned rules is what the kernel's v1 `devices.allow`
    /// does (same key: access OR-ed) and what the device program's table
    /// holds ([`super::program::generate_with_table`]); either way the
    /// result decides every request as `wider` does.
    pub fn extension(&self, wider: &DeviceRules) -> Option<Vec<DeviceRule>> {
        let same_key = |a: &DeviceRule, b: &DeviceRule| {
            a.kind == b.kind && a.major == b.major && a.minor == b.minor
        };
        let covered = self.rules.iter().all(|old| {
            wider
                .rules
                .iter()
                .any(|new| same_key(old, new) && new.access.contains(old.access))
        });
        if !covered {
            return None;
        }
        let added: Vec<DeviceRule> = wider
            .rules
            .iter()
            .filter(|new| !self.rules.contains(new))
            .copied()
            .collect();
        added.iter().all(DeviceRule::is_exact).then_some(added)
    }

    /// Would opening (or mknod'ing) device `kind major:minor` with `access`
    /// be allowed? True iff one rule matches type, major and minor and its
    /// access contains all of `access` (the kernel's rule: it does not
    /// combine access from different rules). `DeviceType::All` asks for
    /// both a character and a block device.
    pub fn allows(&self, kind: DeviceType, major: u32, minor: u32, access: Access) -> bool {
        match kind {
            DeviceType::All => {
                self.allows(DeviceType::Char, major, minor, access)
                    && self.allows(DeviceType::Block, major, minor, access)
            }
            DeviceType::Char | DeviceType::Block => self
                .rules
                .iter()
                .any(|r| r.matches(kind, major, minor, access)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_and_prints_examples() {
        for line in [
            "c 195:0 rw",
            "c 1:* rwm",
            "b *:* r",
            "a *:3 wm",
            "c 136:* rw",
        ] {
            let rule = DeviceRule::parse(line).unwrap();
            assert_eq!(rule.to_v1_line(), line);
        }
        assert_eq!(
            DeviceRule::parse("c 195:255 rw").unwrap(),
            DeviceRule::char(195, 255, Access::RW)
        );
        assert_eq!(
            DeviceRule::parse("  c   1:3   mwr ").unwrap().to_v1_line(),
            "c 1:3 rwm"
        );
        assert_eq!(DeviceRule::parse("a").unwrap().to_v1_line(), "a *:* rwm");
    }

    #[test]
    fn rejects_malformed_rules_naming_the_input() {
        for bad in [
            "",
            "c",
            "c 1:3",
            "x 1:3 r",
            "c 1-3 r",
            "c 1: r",
            "c :3 r",
            "c -1:3 r",
            "c +1:3 r",
            "c 1:3 rr",
            "c 1:3 rx",
            "c 1:3 r extra",
            "c 4294967295:0 r",
            "c 1:4294967296 r",
        ] {
            let err = DeviceRule::parse(bad).unwrap_err();
            assert!(
                matches!(&err, DeviceError::Parse { input, .. } if input == bad),
                "{bad:?} gave {err:?}"
            );
            assert!(err.to_string().contains("expected"), "{err}");
        }
    }

    #[test]
    fn access_parse_display_and_bits() {
        assert_eq!(Access::parse("rw").unwrap(), Access::RW);
        assert_eq!(Access::parse("mrw").unwrap(), Access::RWM);
        assert_eq!(Access::RWM.to_string(), "rwm");
        assert_eq!(Access::M.bpf_bits(), 1);
        assert_eq!(Access::R.bpf_bits(), 2);
        assert_eq!(Access::W.bpf_bits(), 4);
        assert!(Access::parse("").is_err());
        assert!(Access::RW.contains(Access::R));
        assert!(!Access::RW.contains(Access::M));
        assert!(Access::R.contains(Access::NONE));
        for bits in 0..8 {
            assert_eq!(Access::from_bpf_bits(bits).bpf_bits(), bits);
        }
    }

    #[test]
    fn minimal_is_the_documented_dev() {
        let lines: Vec<String> = DeviceRules::minimal()
            .rules()
            .iter()
            .map(DeviceRule::to_v1_line)
            .collect();
        assert_eq!(
            lines,
            [
                "c 1:3 rw",
                "c 1:5 rw",
                "c 1:7 rw",
                "c 1:8 rw",
                "c 1:9 rw",
                "c 5:0 rw",
                "c 5:2 rw",
                "c 136:* rw"
            ]
        );
    }

    #[test]
    fn allows_follows_wildcards_access_and_type() {
        let rules = DeviceRules::minimal();
        assert!(rules.allows(DeviceType::Char, 1, 3, Access::RW));
        assert!(rules.allows(DeviceType::Char, 1, 3, Access::R));
        assert!(
            !rules.allows(DeviceType::Char, 1, 3, Access::RWM),
            "no mknod"
        );
        assert!(
            !rules.allows(DeviceType::Block, 1, 3, Access::R),
            "char rule, block request"
        );
        assert!(
            rules.allows(DeviceType::Char, 136, 41, Access::W),
            "136:* wildcard"
        );
        assert!(!rules.allows(DeviceType::Char, 195, 0, Access::R));
        assert!(!DeviceRules::deny_all().allows(DeviceType::Char, 1, 3, Access::R));

        let mut all = DeviceRules::deny_all();
        all.allow(DeviceRule::parse("a *:7 r").unwrap());
        assert!(all.allows(DeviceType::Block, 8, 7, Access::R));
        assert!(all.allows(DeviceType::Char, 9, 7, Access::R));
        assert!(all.allows(DeviceType::All, 9, 7, Access::R));
        assert!(!all.allows(DeviceType::Char, 9, 6, Access::R));
        assert!(!all.allows(DeviceType::Char, 9, 7, Access::W));

        let mut only_char = DeviceRules::deny_all();
        only_char.allow(DeviceRule::char(8, 0, Access::R));
        assert!(
            !only_char.allows(DeviceType::All, 8, 0, Access::R),
            "All asks for both"
        );
    }

    #[test]
    fn access_is_not_combined_across_wildcard_rules() {
        let mut rules = DeviceRules::deny_all();
        rules.allow(DeviceRule::parse("c 1:* r").unwrap());
        rules.allow(DeviceRule::parse("c 1:3 w").unwrap());
        assert!(rules.allows(DeviceType::Char, 1, 3, Access::W));
        assert!(rules.allows(DeviceType::Char, 1, 3, Access::R));
        assert!(!rules.allows(DeviceType::Char, 1, 3, Access::RW));
    }

    #[test]
    fn normalises_like_the_kernel_exception_list() {
        let mut rules = DeviceRules::deny_all();
        rules
            .allow(DeviceRule::parse("c 1:3 r").unwrap())
            .allow(DeviceRule::parse("a 1:3 m").unwrap())
            .allow(DeviceRule::parse("c 1:3 w").unwrap())
            .allow(DeviceRule {
                access: Access::NONE,
                ..DeviceRule::char(2, 2, Access::R)
            })
            .allow(DeviceRule::char(u32::MAX, 0, Access::R))
            .allow(DeviceRule::char(0, u32::MAX, Access::R));
        let lines: Vec<String> = rules.rules().iter().map(DeviceRule::to_v1_line).collect();
        assert_eq!(lines, ["c 1:3 rwm", "b 1:3 m"]);
        assert!(
            rules.allows(DeviceType::Char, 1, 3, Access::RW),
            "same key merges like v1"
        );
    }

    #[test]
    fn extension_adds_exact_rules_only() {
        let base = DeviceRules::minimal();
        let mut gpu = base.clone();
        gpu.allow(DeviceRule::char(195, 3, Access::RW));
        gpu.allow(DeviceRule::char(195, 255, Access::RW));
        assert_eq!(
            base.extension(&gpu),
            Some(vec![
                DeviceRule::char(195, 3, Access::RW),
                DeviceRule::char(195, 255, Access::RW)
            ])
        );
        assert_eq!(base.extension(&base), Some(vec![]));

        // Wider access on a rule the base has: that rule, widened.
        let mut mknod = base.clone();
        mknod.allow(DeviceRule::char(1, 3, Access::M));
        assert_eq!(
            base.extension(&mknod),
            Some(vec![DeviceRule::char(1, 3, Access::RWM)])
        );

        // A wildcard cannot go in the table; a rule the job lacks cannot be
        // taken away by adding.
        let mut wild = base.clone();
        wild.allow(DeviceRule::parse("c 195:* rw").unwrap());
        assert_eq!(base.extension(&wild), None);
        assert_eq!(gpu.extension(&base), None);
        let mut narrower = DeviceRules::deny_all();
        for r in base.rules() {
            narrower.allow(DeviceRule {
                access: Access::R,
                ..*r
            });
        }
        assert_eq!(base.extension(&narrower), None);
        assert_eq!(
            narrower.extension(&base),
            None,
            "136:* is widened, a wildcard"
        );
    }

    #[test]
    fn serde_keeps_the_shape_and_normalises() {
        let json = serde_json::to_string(&DeviceRules::minimal()).unwrap();
        assert!(
            json.starts_with(r#"{"rules":[{"kind":"char","major":1,"minor":3,"access":"rw"}"#),
            "{json}"
        );
        let back: DeviceRules = serde_json::from_str(&json).unwrap();
        assert_eq!(back, DeviceRules::minimal());
        let odd: DeviceRules = serde_json::from_str(
            r#"{"rules":[{"kind":"all","major":null,"minor":null,"access":"rwm"}]}"#,
        )
        .unwrap();
        assert_eq!(odd.rules().len(), 2);
        assert!(serde_json::from_str::<DeviceRules>(
            r#"{"rules":[{"kind":"char","major":1,"minor":3,"access":"rx"}]}"#
        )
        .is_err());
    }

    fn number() -> impl Strategy<Value = Option<u32>> {
        prop_oneof![
            Just(None),
            (0u32..4).prop_map(Some),
            (0u32..u32::MAX).prop_map(Some)
        ]
    }

    prop_compose! {
        fn any_rule()(kind in prop_oneof![Just(DeviceType::Char), Just(DeviceType::Block), Just(DeviceType::All)],
                      major in number(), minor in number(), bits in 1u32..8) -> DeviceRule {
            DeviceRule { kind, major, minor, access: Access::from_bpf_bits(bits) }
        }
    }

    proptest! {
        #[test]
        fn every_rule_round_trips(rule in any_rule()) {
            prop_assert_eq!(DeviceRule::parse(&rule.to_v1_line()).unwrap(), rule);
        }

        #[test]
        fn normalising_never_changes_a_decision(
            raw in proptest::collection::vec(any_rule(), 0..8),
            major in 0u32..4, minor in 0u32..4, bits in 0u32..8,
            block in any::<bool>(),
        ) {
            let mut rules = DeviceRules::deny_all();
            for r in &raw { rules.allow(*r); }
            prop_assert!(rules.rules().iter().all(|r| r.kind != DeviceType::All));
            let kind = if block { DeviceType::Block } else { DeviceType::Char };
            let access = Access::from_bpf_bits(bits);
            // Merging only ever adds access on exactly the same key, so any
            // request a raw rule allowed is still allowed.
            let raw_allows = raw.iter().any(|r| r.matches(kind, major, minor, access));
            if raw_allows { prop_assert!(rules.allows(kind, major, minor, access)); }
        }
    }
}
