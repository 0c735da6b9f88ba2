//! The device program generator's tests: an interpreter of the generated
//! eBPF (enough of it for these programs) that checks each program against
//! [`DeviceRules::allows`], by example and by property.

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
                    regs[0] = Some(entries.get(&key).map_or(Reg::Scalar(0), |&v| Reg::Value(v)));
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

/// The allow-list of `raw`'s rules, on a deny-all base.
fn rules_of(raw: &[DeviceRule]) -> DeviceRules {
    let mut rules = DeviceRules::deny_all();
    for r in raw {
        rules.allow(*r);
    }
    rules
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
        let rules = rules_of(&raw);
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
        let rules = rules_of(&raw);
        let (kind, major, minor, access) = request_near(&rules, pick, block, bits, bump);
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
        let base = rules_of(&raw);
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

    /// A program of `rules`' wildcard blocks whose table holds their
    /// exact devices ([`split_for_table`]) decides as `rules` do.
    #[test]
    fn split_program_and_table_agree_with_allows(
        raw in proptest::collection::vec(any_rule(), 0..10),
        pick in any::<proptest::sample::Index>(),
        block in any::<bool>(), bits in 0u32..8, bump in 0u32..2,
    ) {
        let rules = rules_of(&raw);
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
