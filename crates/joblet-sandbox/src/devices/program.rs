//! Pure generation of the cgroup v2 device program (`BPF_PROG_TYPE_CGROUP_DEVICE`)
//! from a [`DeviceRules`] allow-list; no syscalls here.
//!
//! The program reads `struct bpf_cgroup_dev_ctx { u32 access_type; u32 major;
//! u32 minor; }` (`access_type = access << 16 | type`, access MKNOD=1 READ=2
//! WRITE=4, type BLOCK=1 CHAR=2) and returns 1 (allow) or 0 (EPERM):
//!
//! ```text
//!   r6 = r1                            ; keep the context pointer
//!   per rule:                          ; every check jumps to the next rule on mismatch
//!     w2 = ctx.access_type & 0xffff ; if w2 != TYPE goto next
//!     w3 = ctx.access_type >> 16 ; w1 = w3 & ACCESS ; if w1 != w3 goto next
//!                                      ; requested ⊆ allowed (skipped for rwm)
//!     w4 = ctx.major ; if w4 != MAJOR goto next  ; skipped for *
//!     w5 = ctx.minor ; if w5 != MINOR goto next  ; skipped for *
//!     r0 = 1 ; exit
//!   r0 = 0 ; exit                      ; default deny
//! ```
//!
//! Each block loads the fields it compares instead of sharing loads from a
//! header (as runc/crun/youki do): then no register carries facts the
//! verifier learned in an earlier block, every path into a block looks the
//! same, and the verifier prunes them, so verification grows linearly with
//! the number of rules. With shared loads it grows quadratically and a
//! 500-rule program exceeds the kernel's one-million-instruction
//! verification limit (seen on 6.18: E2BIG, "BPF program is too large").
//! The remaining bound is the verifier's 8192 pending branches: about 2,700
//! rules (6.18: 2,500 rules load in ~90 ms, 2,900 fail with EFAULT "The
//! sequence of 8193 jumps is too complex"); a job needs a few dozen.
//!
//! All comparisons are 32-bit (`BPF_JMP32`), so numbers ≥ 2^31 are compared
//! as the unsigned values they are rather than sign-extended immediates.
//!
//! [`generate_with_table`] ends the program with a table instead of the
//! default deny: a `BPF_MAP_TYPE_HASH` of exact devices, key
//! `{u32 type; u32 major; u32 minor}`, value the allowed access bits. A
//! request no rule allowed is looked up there:
//!
//! ```text
//!   key on the stack at r10-12: type, major, minor (from the context)
//!   r1 = map ; r2 = r10 - 12 ; call bpf_map_lookup_elem
//!   if r0 == 0 goto deny
//!   w1 = *(u32 *)r0 ; w3 = ctx.access_type >> 16 ; w1 &= w3
//!   if w1 != w3 goto deny ; r0 = 1 ; exit
//!   deny: r0 = 0 ; exit
//! ```
//!
//! A filter with a table keeps its exact rules (`c 1:3 rw`) there, split off
//! by [`split_for_table`], and only its wildcard rules (`c 136:* rw`) as
//! blocks: the verifier's work grows with the blocks, and the table's
//! entries cost it nothing. On 6.18 (`benches/device_filter.rs`) a
//! GPU-ready sandbox's ten rules take ~0.44 ms to load as blocks and
//! ~0.15 ms as one block and a table of nine, creating, filling and reading
//! back the table included; an 8-GPU job's 18 rules ~0.61 and ~0.17 ms.
//! The job that claims a warm sandbox adds its GPUs' devices to
//! the table ([`DeviceRules::extension`]) with one
//! `bpf(BPF_MAP_UPDATE_ELEM)` each, instead of loading (and verifying) a
//! program of its own and swapping it in.

use super::{DeviceRules, DeviceType};

/// One eBPF instruction, laid out as the kernel's `struct bpf_insn`
/// (`u8 code; u8 dst_reg:4, src_reg:4; s16 off; s32 imm;`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct BpfInsn {
    /// Opcode: class | size/op | mode/source.
    pub code: u8,
    /// Destination register in the low nibble, source register in the high one.
    pub regs: u8,
    /// Signed offset (memory offset or jump distance).
    pub off: i16,
    /// Signed immediate.
    pub imm: i32,
}

const _: () = assert!(std::mem::size_of::<BpfInsn>() == 8);

/// Opcode pieces used by the generator (see `include/uapi/linux/bpf_common.h`).
pub mod op {
    /// `BPF_LDX` class.
    pub const LDX: u8 = 0x01;
    /// `BPF_ALU` class (32-bit, zero-extends the result).
    pub const ALU: u8 = 0x04;
    /// `BPF_JMP` class (64-bit compares).
    pub const JMP: u8 = 0x05;
    /// `BPF_JMP32` class (32-bit compares).
    pub const JMP32: u8 = 0x06;
    /// `BPF_ALU64` class (64-bit, needed to copy a pointer).
    pub const ALU64: u8 = 0x07;
    /// `BPF_W`: 32-bit memory access.
    pub const W: u8 = 0x00;
    /// `BPF_MEM` mode.
    pub const MEM: u8 = 0x60;
    /// `BPF_K`: immediate operand.
    pub const K: u8 = 0x00;
    /// `BPF_X`: register operand.
    pub const X: u8 = 0x08;
    /// `BPF_AND`
    pub const AND: u8 = 0x50;
    /// `BPF_RSH`
    pub const RSH: u8 = 0x70;
    /// `BPF_MOV`
    pub const MOV: u8 = 0xb0;
    /// `BPF_JNE`
    pub const JNE: u8 = 0x50;
    /// `BPF_EXIT`
    pub const EXIT: u8 = 0x90;
    /// `BPF_LD` class (only `BPF_LD | BPF_DW | BPF_IMM`, the 64-bit load).
    pub const LD: u8 = 0x00;
    /// `BPF_STX` class.
    pub const STX: u8 = 0x03;
    /// `BPF_DW`: 64-bit size.
    pub const DW: u8 = 0x18;
    /// `BPF_IMM` mode.
    pub const IMM: u8 = 0x00;
    /// `BPF_ADD`
    pub const ADD: u8 = 0x00;
    /// `BPF_JEQ`
    pub const JEQ: u8 = 0x10;
    /// `BPF_CALL`
    pub const CALL: u8 = 0x80;
    /// `BPF_PSEUDO_MAP_FD`: the 64-bit load's immediate is a map descriptor.
    pub const PSEUDO_MAP_FD: u8 = 1;
    /// Helper `bpf_map_lookup_elem`.
    pub const FUNC_MAP_LOOKUP_ELEM: i32 = 1;
}

impl BpfInsn {
    fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Self {
        BpfInsn {
            code,
            regs: (src << 4) | (dst & 0x0f),
            off,
            imm,
        }
    }

    /// The destination register.
    pub fn dst(&self) -> u8 {
        self.regs & 0x0f
    }

    /// The source register.
    pub fn src(&self) -> u8 {
        self.regs >> 4
    }

    fn load_u32(dst: u8, src: u8, off: i16) -> Self {
        Self::new(op::LDX | op::W | op::MEM, dst, src, off, 0)
    }

    fn alu32_imm(alu: u8, dst: u8, imm: i32) -> Self {
        Self::new(op::ALU | alu | op::K, dst, 0, 0, imm)
    }

    fn and32_reg(dst: u8, src: u8) -> Self {
        Self::new(op::ALU | op::AND | op::X, dst, src, 0, 0)
    }

    fn mov32_reg(dst: u8, src: u8) -> Self {
        Self::new(op::ALU | op::MOV | op::X, dst, src, 0, 0)
    }

    fn mov64_reg(dst: u8, src: u8) -> Self {
        Self::new(op::ALU64 | op::MOV | op::X, dst, src, 0, 0)
    }

    fn jne32_imm(dst: u8, imm: u32, off: i16) -> Self {
        // Reinterpreting the bits is intended: JMP32 compares 32 bits.
        Self::new(op::JMP32 | op::JNE | op::K, dst, 0, off, imm as i32)
    }

    fn jne32_reg(dst: u8, src: u8, off: i16) -> Self {
        Self::new(op::JMP32 | op::JNE | op::X, dst, src, off, 0)
    }

    fn exit() -> Self {
        Self::new(op::JMP | op::EXIT, 0, 0, 0, 0)
    }

    fn store_u32(dst: u8, off: i16, src: u8) -> Self {
        Self::new(op::STX | op::W | op::MEM, dst, src, off, 0)
    }

    /// `dst = map` (two instructions: the 64-bit load of a map descriptor).
    fn load_map_fd(dst: u8, map_fd: i32) -> [Self; 2] {
        [
            Self::new(op::LD | op::DW | op::IMM, dst, op::PSEUDO_MAP_FD, 0, map_fd),
            Self::new(0, 0, 0, 0, 0),
        ]
    }

    fn add64_imm(dst: u8, imm: i32) -> Self {
        Self::new(op::ALU64 | op::ADD | op::K, dst, 0, 0, imm)
    }

    fn call(func: i32) -> Self {
        Self::new(op::JMP | op::CALL, 0, 0, 0, func)
    }

    fn jeq64_imm(dst: u8, imm: i32, off: i16) -> Self {
        Self::new(op::JMP | op::JEQ | op::K, dst, 0, off, imm)
    }
}

/// The table's key: `{u32 type; u32 major; u32 minor}`, native endian.
pub const TABLE_KEY_SIZE: u32 = 12;
/// The table's value: the allowed access bits (MKNOD=1 READ=2 WRITE=4).
pub const TABLE_VALUE_SIZE: u32 = 4;

/// The table key of an exact rule (`None` for a wildcard or `All` rule,
/// which cannot go in the table).
pub fn table_key(rule: &super::DeviceRule) -> Option<[u8; 12]> {
    let kind = match rule.kind {
        DeviceType::Char => BPF_DEVCG_DEV_CHAR,
        DeviceType::Block => BPF_DEVCG_DEV_BLOCK,
        DeviceType::All => return None,
    };
    let mut key = [0u8; 12];
    key[0..4].copy_from_slice(&kind.to_ne_bytes());
    key[4..8].copy_from_slice(&rule.major?.to_ne_bytes());
    key[8..12].copy_from_slice(&rule.minor?.to_ne_bytes());
    Some(key)
}

/// Device type values in `access_type & 0xffff` (`BPF_DEVCG_DEV_*`).
pub const BPF_DEVCG_DEV_BLOCK: u32 = 1;
/// `BPF_DEVCG_DEV_CHAR`
pub const BPF_DEVCG_DEV_CHAR: u32 = 2;

/// Register holding the context pointer for the whole program.
const CTX: u8 = 6;

/// One `if … goto next rule` check of a block, before offsets are known.
enum Check {
    Type(u32),
    AccessSubset(i32),
    Major(u32),
    Minor(u32),
}

impl Check {
    /// The check's instructions; the last one is the jump, given `skip`
    /// (the distance from the instruction after it to the next block).
    fn emit(&self, skip: i16, out: &mut Vec<BpfInsn>) {
        match *self {
            Check::Type(t) => {
                out.push(BpfInsn::load_u32(2, CTX, 0));
                out.push(BpfInsn::alu32_imm(op::AND, 2, 0xffff));
                out.push(BpfInsn::jne32_imm(2, t, skip));
            }
            Check::AccessSubset(bits) => {
                out.push(BpfInsn::load_u32(3, CTX, 0));
                out.push(BpfInsn::alu32_imm(op::RSH, 3, 16));
                out.push(BpfInsn::mov32_reg(1, 3));
                out.push(BpfInsn::alu32_imm(op::AND, 1, bits));
                out.push(BpfInsn::jne32_reg(1, 3, skip));
            }
            Check::Major(m) => {
                out.push(BpfInsn::load_u32(4, CTX, 4));
                out.push(BpfInsn::jne32_imm(4, m, skip));
            }
            Check::Minor(m) => {
                out.push(BpfInsn::load_u32(5, CTX, 8));
                out.push(BpfInsn::jne32_imm(5, m, skip));
            }
        }
    }

    fn len(&self) -> i16 {
        match self {
            Check::Type(_) => 3,
            Check::AccessSubset(_) => 5,
            Check::Major(_) | Check::Minor(_) => 2,
        }
    }
}

/// Generates the device program for `rules`: one block per rule, default
/// deny. The result is a complete program for `BPF_PROG_LOAD`.
pub fn generate(rules: &DeviceRules) -> Vec<BpfInsn> {
    let mut insns = rule_blocks(rules);
    insns.push(BpfInsn::alu32_imm(op::MOV, 0, 0));
    insns.push(BpfInsn::exit());
    insns
}

/// Generates the device program for `rules` followed by a lookup in the
/// table `map_fd` (see the module doc): a request is allowed when a rule
/// or the table entry of its exact device allows it.
pub fn generate_with_table(rules: &DeviceRules, map_fd: i32) -> Vec<BpfInsn> {
    let mut insns = rule_blocks(rules);
    // The key, built on the stack from the context.
    insns.push(BpfInsn::load_u32(2, CTX, 0));
    insns.push(BpfInsn::alu32_imm(op::AND, 2, 0xffff));
    insns.push(BpfInsn::store_u32(10, -12, 2));
    insns.push(BpfInsn::load_u32(2, CTX, 4));
    insns.push(BpfInsn::store_u32(10, -8, 2));
    insns.push(BpfInsn::load_u32(2, CTX, 8));
    insns.push(BpfInsn::store_u32(10, -4, 2));
    insns.extend(BpfInsn::load_map_fd(1, map_fd));
    insns.push(BpfInsn::mov64_reg(2, 10));
    insns.push(BpfInsn::add64_imm(2, -12));
    insns.push(BpfInsn::call(op::FUNC_MAP_LOOKUP_ELEM));
    // No entry: deny (skip the 7 instructions up to it).
    insns.push(BpfInsn::jeq64_imm(0, 0, 7));
    insns.push(BpfInsn::load_u32(1, 0, 0));
    insns.push(BpfInsn::load_u32(3, CTX, 0));
    insns.push(BpfInsn::alu32_imm(op::RSH, 3, 16));
    insns.push(BpfInsn::and32_reg(1, 3));
    insns.push(BpfInsn::jne32_reg(1, 3, 2));
    insns.push(BpfInsn::alu32_imm(op::MOV, 0, 1));
    insns.push(BpfInsn::exit());
    insns.push(BpfInsn::alu32_imm(op::MOV, 0, 0));
    insns.push(BpfInsn::exit());
    insns
}

/// `rules` split for a program with a table ([`generate_with_table`]): the
/// rules it must keep as blocks (those with a wildcard major or minor) and
/// the exact ones, for its table. The two decide as `rules` do: rules are
/// merged per device ([`DeviceRules::allow`]), so an exact device has one
/// entry, with the access of its one rule.
pub fn split_for_table(rules: &DeviceRules) -> (DeviceRules, Vec<super::DeviceRule>) {
    let mut blocks = DeviceRules::deny_all();
    let mut exact = Vec::new();
    for rule in rules.rules() {
        if table_key(rule).is_some() {
            exact.push(*rule);
        } else {
            blocks.allow(*rule);
        }
    }
    (blocks, exact)
}

/// `r6 = r1`, then one block per rule that exits with 1 when its rule
/// allows the request and jumps past itself otherwise.
fn rule_blocks(rules: &DeviceRules) -> Vec<BpfInsn> {
    let mut insns = vec![BpfInsn::mov64_reg(CTX, 1)];
    for rule in rules.rules() {
        let mut checks = Vec::with_capacity(4);
        match rule.kind {
            DeviceType::Char => checks.push(Check::Type(BPF_DEVCG_DEV_CHAR)),
            DeviceType::Block => checks.push(Check::Type(BPF_DEVCG_DEV_BLOCK)),
            DeviceType::All => {}
        }
        let bits = rule.access.bpf_bits();
        if bits != super::Access::RWM.bpf_bits() {
            // At most 7: fits an i32 as is.
            checks.push(Check::AccessSubset(bits as i32));
        }
        if let Some(major) = rule.major {
            checks.push(Check::Major(major));
        }
        if let Some(minor) = rule.minor {
            checks.push(Check::Minor(minor));
        }
        // The checks, then `r0 = 1; exit`.
        let mut remaining: i16 = checks.iter().map(Check::len).sum::<i16>() + 2;
        for check in &checks {
            remaining -= check.len();
            check.emit(remaining, &mut insns);
        }
        insns.push(BpfInsn::alu32_imm(op::MOV, 0, 1));
        insns.push(BpfInsn::exit());
    }
    insns
}

#[cfg(test)]
mod tests;
