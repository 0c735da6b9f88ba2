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
mod tests {
    use super::*;
    use crate::devices::{Access, DeviceRule};
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// `struct bpf_cgroup_dev_ctx` as the kernel fills it.
    #[derive(Debug, Clone, Copy)]
    struct Ctx {
        access_type: u32,
        major: u32,
        minor: u32,
    }

    /// A value in a register: a scalar, the context pointer (r1 on entry),
    /// the frame pointer plus an offset (r10), the table, or a pointer to a
    /// table entry's value.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Reg {
        Scalar(u64),
        Ctx,
        Stack(i16),
        Map(i32),
        Value(u32),
    }

    /// The table the program was generated with: its descriptor and entries.
    type Table = (i32, HashMap<[u8; 12], u32>);

    /// Runs the instruction subset the generator may emit, with the
    /// semantics of the kernel's interpreter (32-bit ALU zero-extends,
    /// JMP32 compares the low 32 bits, JMP compares 64 bits with the
    /// immediate sign-extended; a helper call clobbers r1–r5). Anything
    /// else, a read of an unset register, a bad context or stack access, a
    /// lookup in another map or running off the end panics, as the verifier
    /// would refuse such a program.
    fn interpret(prog: &[BpfInsn], ctx: Ctx) -> u64 {
        interpret_with(prog, ctx, None)
    }

    fn interpret_with(prog: &[BpfInsn], ctx: Ctx, table: Option<&Table>) -> u64 {
        let mut regs: [Option<Reg>; 11] = [None; 11];
        regs[1] = Some(Reg::Ctx);
        regs[10] = Some(Reg::Stack(0));
        let mut stack = [None::<u32>; 3]; // the key's three u32 slots at -12, -8, -4
        let scalar = |regs: &[Option<Reg>; 11], r: u8| match regs[usize::from(r)] {
            Some(Reg::Scalar(v)) => v,
            other => panic!("r{r} is {other:?}, not a scalar"),
        };
        let slot = |off: i16| match off {
            -12 => 0usize,
            -8 => 1,
            -4 => 2,
            other => panic!("stack offset {other} is not a key slot"),
        };
        let mut pc = 0usize;
        for _ in 0..=prog.len() {
            let insn = prog
                .get(pc)
                .unwrap_or_else(|| panic!("pc {pc} ran off the program"));
            let (dst, src) = (insn.dst(), insn.src());
            let class = insn.code & 0x07;
            let code = insn.code;
            pc += 1;
            match class {
                op::LDX => {
                    assert_eq!(code, op::LDX | op::W | op::MEM, "only 32-bit loads");
                    let v = match regs[usize::from(src)] {
                        Some(Reg::Ctx) => match insn.off {
                            0 => ctx.access_type,
                            4 => ctx.major,
                            8 => ctx.minor,
                            off => panic!("bad ctx offset {off}"),
                        },
                        Some(Reg::Value(bits)) => {
                            assert_eq!(insn.off, 0, "the value is one u32");
                            bits
                        }
                        other => panic!("load from {other:?}"),
                    };
                    regs[usize::from(dst)] = Some(Reg::Scalar(u64::from(v)));
                }
                op::STX => {
                    assert_eq!(code, op::STX | op::W | op::MEM, "only 32-bit stores");
                    assert_eq!(
                        regs[usize::from(dst)],
                        Some(Reg::Stack(0)),
                        "store to the frame only"
                    );
                    stack[slot(insn.off)] = Some(scalar(&regs, src) as u32);
                }
                op::LD => {
                    assert_eq!(code, op::LD | op::DW | op::IMM, "only the 64-bit load");
                    assert_eq!(src, op::PSEUDO_MAP_FD, "only map descriptors");
                    assert_eq!(
                        prog.get(pc),
                        Some(&BpfInsn::new(0, 0, 0, 0, 0)),
                        "second half"
                    );
                    pc += 1;
                    regs[usize::from(dst)] = Some(Reg::Map(insn.imm));
                }
                op::ALU64 => match code {
                    c if c == op::ALU64 | op::MOV | op::X => {
                        regs[usize::from(dst)] =
                            Some(regs[usize::from(src)].unwrap_or_else(|| panic!("r{src} unset")));
                    }
                    c if c == op::ALU64 | op::ADD | op::K => match regs[usize::from(dst)] {
                        Some(Reg::Stack(o)) => {
                            regs[usize::from(dst)] = Some(Reg::Stack(o + insn.imm as i16))
                        }
                        other => panic!("64-bit add to {other:?}"),
                    },
                    other => panic!("unexpected ALU64 op {other:#x}"),
                },
                op::ALU => {
                    let operand = if code & op::X != 0 {
                        scalar(&regs, src) as u32
                    } else {
                        insn.imm as u32
                    };
                    let v = match code & 0xf0 {
                        op::MOV => operand,
                        op::AND => (scalar(&regs, dst) as u32) & operand,
                        op::RSH => (scalar(&regs, dst) as u32) >> (operand & 31),
                        other => panic!("unexpected ALU op {other:#x}"),
                    };
                    regs[usize::from(dst)] = Some(Reg::Scalar(u64::from(v)));
                }
                op::JMP | op::JMP32 => match code & 0xf0 {
                    op::EXIT => {
                        assert_eq!(class, op::JMP);
                        return scalar(&regs, 0);
                    }
                    op::CALL => {
                        assert_eq!(insn.imm, op::FUNC_MAP_LOOKUP_ELEM, "only map lookups");
                        let (fd, entries) = table.expect("a lookup needs a table");
                        assert_eq!(regs[1], Some(Reg::Map(*fd)), "r1 is the table");
                        assert_eq!(regs[2], Some(Reg::Stack(-12)), "r2 is the key");
                        let word = |i: usize| stack[i].expect("key slot written").to_ne_bytes();
                        let mut key = [0u8; 12];
                        for i in 0..3 {
                            key[i * 4..i * 4 + 4].copy_from_slice(&word(i));
                        }
                        regs[0] =
                            Some(entries.get(&key).map_or(Reg::Scalar(0), |&v| Reg::Value(v)));
                        for r in &mut regs[1..=5] {
                            *r = None;
                        }
                    }
                    op::JEQ => {
                        assert_eq!(code, op::JMP | op::JEQ | op::K, "only 64-bit == imm");
                        let equal = match regs[usize::from(dst)] {
                            Some(Reg::Scalar(v)) => v == i64::from(insn.imm) as u64,
                            Some(Reg::Value(_)) => {
                                assert_eq!(insn.imm, 0, "a pointer is only compared with null");
                                false
                            }
                            other => panic!("compare of {other:?}"),
                        };
                        if equal {
                            assert!(insn.off >= 0, "backward jump");
                            pc += insn.off as usize;
                        }
                    }
                    op::JNE => {
                        let a = scalar(&regs, dst);
                        let b = if code & op::X != 0 {
                            scalar(&regs, src)
                        } else {
                            i64::from(insn.imm) as u64
                        };
                        let differ = if class == op::JMP32 {
                            a as u32 != b as u32
                        } else {
                            a != b
                        };
                        if differ {
                            assert!(insn.off >= 0, "backward jump");
                            pc += insn.off as usize;
                        }
                    }
                    other => panic!("unexpected jump op {other:#x}"),
                },
                other => panic!("unexpected class {other:#x}"),
            }
        }
        panic!("program did not exit");
    }

    fn ctx(kind: DeviceType, major: u32, minor: u32, access: Access) -> Ctx {
        let t = match kind {
            DeviceType::Block => BPF_DEVCG_DEV_BLOCK,
            DeviceType::Char => BPF_DEVCG_DEV_CHAR,
            DeviceType::All => panic!("the kernel asks for one type"),
        };
        Ctx {
            access_type: (access.bpf_bits() << 16) | t,
            major,
            minor,
        }
    }

    #[test]
    fn deny_all_is_r0_zero_exit() {
        let prog = generate(&DeviceRules::deny_all());
        assert_eq!(prog.len(), 3);
        assert_eq!(interpret(&prog, ctx(DeviceType::Char, 1, 3, Access::R)), 0);
    }

    #[test]
    fn a_fully_wild_rule_has_only_the_type_check() {
        let mut rules = DeviceRules::deny_all();
        rules.allow(DeviceRule::parse("c *:* rwm").unwrap());
        let prog = generate(&rules);
        assert_eq!(prog.len(), 1 + 3 + 2 + 2);
        assert_eq!(prog[3], BpfInsn::jne32_imm(2, BPF_DEVCG_DEV_CHAR, 2));
        assert_eq!(
            interpret(&prog, ctx(DeviceType::Char, 7, 7, Access::RWM)),
            1
        );
        assert_eq!(interpret(&prog, ctx(DeviceType::Block, 7, 7, Access::R)), 0);
    }

    #[test]
    fn minimal_and_gpu_rules_decide_as_expected() {
        let mut rules = DeviceRules::minimal();
        rules.allow(DeviceRule::char(195, 0, Access::RW));
        let prog = generate(&rules);
        let run = |k, ma, mi, a| interpret(&prog, ctx(k, ma, mi, a));
        assert_eq!(run(DeviceType::Char, 195, 0, Access::RW), 1);
        assert_eq!(run(DeviceType::Char, 195, 1, Access::R), 0);
        assert_eq!(run(DeviceType::Char, 1, 3, Access::RW), 1);
        assert_eq!(run(DeviceType::Char, 1, 3, Access::M), 0);
        assert_eq!(run(DeviceType::Char, 136, 9, Access::W), 1);
        assert_eq!(run(DeviceType::Block, 1, 3, Access::R), 0);
    }

    #[test]
    fn numbers_above_i32_max_compare_unsigned() {
        let mut rules = DeviceRules::deny_all();
        rules.allow(DeviceRule::char(0x8000_0001, 0xffff_fffe, Access::R));
        let prog = generate(&rules);
        assert_eq!(
            interpret(
                &prog,
                ctx(DeviceType::Char, 0x8000_0001, 0xffff_fffe, Access::R)
            ),
            1
        );
        assert_eq!(
            interpret(&prog, ctx(DeviceType::Char, 1, 0xffff_fffe, Access::R)),
            0
        );
    }

    fn number() -> impl Strategy<Value = u32> {
        prop_oneof![
            0u32..4,
            Just(0x7fff_ffff),
            Just(0x8000_0000),
            Just(u32::MAX - 1),
            any::<u32>()
        ]
    }

    fn wild_or(n: impl Strategy<Value = u32>) -> impl Strategy<Value = Option<u32>> {
        prop_oneof![1 => Just(None), 3 => n.prop_map(Some)]
    }

    /// A request built from the numbers of one of `rules` (5:6 when `pick`
    /// lands past them; a wildcard number becomes 5 or 6), so that matches
    /// are common: its type, major (`bump`ed), minor and access.
    fn request_near(
        rules: &DeviceRules,
        pick: proptest::sample::Index,
        block: bool,
        bits: u32,
        bump: u32,
    ) -> (DeviceType, u32, u32, Access) {
        let numbers: Vec<(Option<u32>, Option<u32>)> = rules
            .rules()
            .iter()
            .map(|r| (r.major, r.minor))
            .chain([(Some(5), Some(6))])
            .collect();
        let (major, minor) = numbers[pick.index(numbers.len())];
        let kind = if block {
            DeviceType::Block
        } else {
            DeviceType::Char
        };
        (
            kind,
            major.unwrap_or(5).wrapping_add(bump),
            minor.unwrap_or(6),
            Access::from_bpf_bits(bits),
        )
    }

    prop_compose! {
        fn any_rule()(kind in prop_oneof![Just(DeviceType::Char), Just(DeviceType::Block), Just(DeviceType::All)],
                      major in wild_or(number()), minor in wild_or(number()), bits in 0u32..8) -> DeviceRule {
            DeviceRule { kind, major, minor, access: Access::from_bpf_bits(bits) }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// The generated program decides every request exactly as the pure
        /// allow-list does.
        #[test]
        fn program_agrees_with_allows(
            raw in proptest::collection::vec(any_rule(), 0..10),
            block in any::<bool>(),
            major in number(), minor in number(), bits in 0u32..8,
        ) {
            let mut rules = DeviceRules::deny_all();
            for r in raw { rules.allow(r); }
            let kind = if block { DeviceType::Block } else { DeviceType::Char };
            let access = Access::from_bpf_bits(bits);
            let prog = generate(&rules);
            let got = interpret(&prog, ctx(kind, major, minor, access));
            prop_assert_eq!(got == 1, rules.allows(kind, major, minor, access));
            prop_assert!(got <= 1);
        }

        /// Requests built from the rules' own numbers, so matches are common.
        #[test]
        fn program_agrees_on_requests_near_the_rules(
            raw in proptest::collection::vec(any_rule(), 1..10),
            pick in any::<proptest::sample::Index>(),
            block in any::<bool>(), bits in 0u32..8, bump in 0u32..2,
        ) {
            let mut rules = DeviceRules::deny_all();
            for r in &raw { rules.allow(*r); }
            let near = raw[pick.index(raw.len())];
            let major = near.major.unwrap_or(5).wrapping_add(bump);
            let minor = near.minor.unwrap_or(6);
            let kind = if block { DeviceType::Block } else { DeviceType::Char };
            let access = Access::from_bpf_bits(bits);
            let got = interpret(&generate(&rules), ctx(kind, major, minor, access));
            prop_assert_eq!(got == 1, rules.allows(kind, major, minor, access));
        }

        /// A warm sandbox's program (its rules and an empty table) decides
        /// as its rules; once a job's extension is in the table it decides
        /// as the job's rules, on requests near either's numbers.
        #[test]
        fn table_program_agrees_with_base_then_with_the_extended_rules(
            raw in proptest::collection::vec(any_rule(), 0..8),
            extra in proptest::collection::vec(
                (any::<bool>(), number(), number(), 1u32..8), 0..6),
            pick in any::<proptest::sample::Index>(),
            block in any::<bool>(), bits in 0u32..8, bump in 0u32..2,
            fd in 3i32..1000,
        ) {
            let mut base = DeviceRules::deny_all();
            for r in &raw { base.allow(*r); }
            let mut wider = base.clone();
            for &(b, major, minor, bits) in &extra {
                let access = Access::from_bpf_bits(bits);
                wider.allow(if b { DeviceRule::block(major, minor, access) }
                            else { DeviceRule::char(major, minor, access) });
            }
            let added = base.extension(&wider);
            prop_assert!(added.is_some(), "exact additions always extend");
            let mut table: Table = (fd, HashMap::new());
            let prog = generate_with_table(&base, fd);

            let (kind, major, minor, access) = request_near(&wider, pick, block, bits, bump);
            let req = ctx(kind, major, minor, access);

            let before = interpret_with(&prog, req, Some(&table));
            prop_assert_eq!(before == 1, base.allows(kind, major, minor, access));
            for rule in added.unwrap() {
                table.1.insert(table_key(&rule).unwrap(), rule.access.bpf_bits());
            }
            let after = interpret_with(&prog, req, Some(&table));
            prop_assert_eq!(after == 1, wider.allows(kind, major, minor, access));
            prop_assert!(after <= 1);
        }
    }

    proptest! {
        /// A program of `rules`' wildcard blocks whose table holds their
        /// exact devices ([`split_for_table`]) decides as `rules` do.
        #[test]
        fn split_program_and_table_agree_with_allows(
            raw in proptest::collection::vec(any_rule(), 0..10),
            pick in any::<proptest::sample::Index>(),
            block in any::<bool>(), bits in 0u32..8, bump in 0u32..2,
        ) {
            let mut rules = DeviceRules::deny_all();
            for r in &raw { rules.allow(*r); }
            let (blocks, exact) = split_for_table(&rules);
            prop_assert!(blocks.rules().iter().all(|r| !r.is_exact()));
            prop_assert_eq!(blocks.rules().len() + exact.len(), rules.rules().len());
            let mut table: Table = (7, HashMap::new());
            for rule in &exact {
                let key = table_key(rule).unwrap();
                prop_assert!(table.1.insert(key, rule.access.bpf_bits()).is_none(), "one entry per device");
            }
            let prog = generate_with_table(&blocks, 7);

            let (kind, major, minor, access) = request_near(&rules, pick, block, bits, bump);
            let got = interpret_with(&prog, ctx(kind, major, minor, access), Some(&table));
            prop_assert_eq!(got == 1, rules.allows(kind, major, minor, access));
        }
    }

    #[test]
    fn a_gpu_sandboxs_rules_keep_one_block() {
        let mut rules = DeviceRules::minimal();
        rules.allow(DeviceRule::char(195, 255, Access::RW));
        rules.allow(DeviceRule::char(195, 0, Access::RW));
        let (blocks, exact) = split_for_table(&rules);
        assert_eq!(
            blocks
                .rules()
                .iter()
                .map(|r| r.to_string())
                .collect::<Vec<_>>(),
            ["c 136:* rw"]
        );
        assert_eq!(exact.len(), rules.rules().len() - 1);
    }

    #[test]
    fn table_keys_name_exact_devices_only() {
        let key = table_key(&DeviceRule::char(195, 3, Access::RW)).unwrap();
        assert_eq!(&key[0..4], &BPF_DEVCG_DEV_CHAR.to_ne_bytes());
        assert_eq!(&key[4..8], &195u32.to_ne_bytes());
        assert_eq!(&key[8..12], &3u32.to_ne_bytes());
        assert_eq!(table_key(&DeviceRule::parse("c 136:* rw").unwrap()), None);
        assert_eq!(table_key(&DeviceRule::parse("a *:* rwm").unwrap()), None);
    }
}
