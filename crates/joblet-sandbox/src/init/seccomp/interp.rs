//! A classic-BPF interpreter for seccomp programs, as the kernel runs them
//! (`kernel/seccomp.c`, `net/core/filter.c`): enough of the instruction
//! set for what seccompiler and `unknown_numbers_filter` emit (word loads
//! from `seccomp_data`, `and`, the constant jumps, `ret`), and the
//! kernel's rule for several filters. Tests only: it lets the compiled
//! programs be checked against [`super::Policy::decide`] for every
//! syscall number without loading anything.

use seccompiler::sock_filter;

/// `struct seccomp_data` (little-endian words, as on every architecture
/// the filter supports).
#[derive(Debug, Clone, Copy)]
pub(super) struct Data {
    pub nr: u32,
    pub arch: u32,
    pub args: [u64; 6],
}

impl Data {
    fn word(&self, offset: u32) -> u32 {
        match offset {
            0 => self.nr,
            4 => self.arch,
            8 | 12 => 0, // instruction_pointer
            16..=60 if offset.is_multiple_of(4) => {
                let arg = self.args[((offset - 16) / 8) as usize];
                if (offset - 16).is_multiple_of(8) {
                    arg as u32
                } else {
                    (arg >> 32) as u32
                }
            }
            _ => panic!("load from offset {offset} outside seccomp_data"),
        }
    }
}

/// The value `prog` returns for `data`. Panics on an instruction this
/// interpreter does not know, a jump out of the program or running off
/// its end (the kernel refuses such programs at load).
pub(super) fn run(prog: &[sock_filter], data: &Data) -> u32 {
    let mut acc: u32 = 0;
    let mut pc = 0usize;
    loop {
        let i = prog
            .get(pc)
            .unwrap_or_else(|| panic!("ran off the program's end at {pc}"));
        pc += 1;
        let jump = |taken: bool| usize::from(if taken { i.jt } else { i.jf });
        match i.code {
            0x20 => acc = data.word(i.k),       // ld [k]
            0x54 => acc &= i.k,                 // and #k
            0x05 => pc += i.k as usize,         // ja
            0x15 => pc += jump(acc == i.k),     // jeq #k
            0x25 => pc += jump(acc > i.k),      // jgt #k
            0x35 => pc += jump(acc >= i.k),     // jge #k
            0x45 => pc += jump(acc & i.k != 0), // jset #k
            0x06 => return i.k,                 // ret #k
            code => panic!("instruction {code:#x} at {} not interpreted", pc - 1),
        }
    }
}

/// The value the kernel acts on when `filters` are loaded in this order:
/// each runs; the most severe action wins (`ACTION_ONLY` compared as
/// signed: kill < trap < errno < … < allow), and of equally severe ones
/// the most recently loaded.
pub(super) fn run_all(filters: &[Vec<sock_filter>], data: &Data) -> u32 {
    let action = |ret: u32| (ret & libc::SECCOMP_RET_ACTION_FULL) as i32;
    let mut best = libc::SECCOMP_RET_ALLOW;
    for f in filters.iter().rev() {
        let ret = run(f, data);
        if action(ret) < action(best) {
            best = ret;
        }
    }
    best
}
