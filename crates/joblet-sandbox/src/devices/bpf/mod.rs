//! The thin cgroup v2 loader: `bpf(2)` syscalls that load the generated
//! device program and attach/detach/query it on a cgroup v2 directory, and
//! the device table such a program may consult ([`DeviceTable`]). The only
//! `unsafe` of the device filter lives here.
//!
//! Lifetime: attaching gives the cgroup its own reference to the program.
//! Dropping an [`AttachedFilter`] only closes our file descriptor; the
//! filter stays attached and enforced until [`AttachedFilter::detach`] is
//! called or the cgroup is removed (the kernel releases it with the
//! cgroup). That is what a job wants: the filter lives exactly as long as the
//! job's cgroup, even if the process that attached it exits.

use std::ffi::c_long;
use std::fs::{File, OpenOptions};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;

use super::program::{self, BpfInsn};
use super::{DeviceError, DeviceRules};

mod table;

pub use table::{DeviceTable, TABLE_CAPACITY};

/// `BPF_PROG_TYPE_CGROUP_DEVICE`
pub const BPF_PROG_TYPE_CGROUP_DEVICE: u32 = 15;
/// `BPF_CGROUP_DEVICE` attach type.
pub const BPF_CGROUP_DEVICE: u32 = 6;
/// `BPF_F_ALLOW_MULTI`: coexist with programs others attach to the same
/// cgroup (all must allow) and with those inherited from ancestors.
pub const BPF_F_ALLOW_MULTI: u32 = 1 << 1;

const BPF_PROG_LOAD: libc::c_int = 5;
const BPF_PROG_ATTACH: libc::c_int = 8;
const BPF_PROG_DETACH: libc::c_int = 9;
const BPF_OBJ_GET_INFO_BY_FD: libc::c_int = 15;
const BPF_PROG_QUERY: libc::c_int = 16;

/// The program's declared license. The device program calls no helper,
/// and only GPL-only helpers care about the license, so the crate's own
/// license is used (the kernel accepts it; see tests/devices_isolation.rs).
const LICENSE: &[u8] = b"Apache-2.0\0";
/// Shown by `bpftool prog` (at most 15 bytes, `[A-Za-z0-9_.]`).
const PROG_NAME: &[u8] = b"joblet_devices";
/// Verifier log size for the retry after a failed load.
const LOG_SIZE: usize = 1 << 16;

/// `union bpf_attr` for `BPF_PROG_LOAD`, up to `expected_attach_type`.
#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// `union bpf_attr` for `BPF_PROG_ATTACH` / `BPF_PROG_DETACH`.
#[repr(C)]
#[derive(Default)]
struct ProgAttachAttr {
    target_fd: u32,
    attach_bpf_fd: u32,
    attach_type: u32,
    attach_flags: u32,
    replace_bpf_fd: u32,
}

/// `union bpf_attr` for `BPF_PROG_QUERY`, up to `prog_cnt`.
#[repr(C)]
#[derive(Default)]
struct ProgQueryAttr {
    target_fd: u32,
    attach_type: u32,
    query_flags: u32,
    attach_flags: u32,
    prog_ids: u64,
    prog_cnt: u32,
    _pad: u32,
}

/// `union bpf_attr` for `BPF_OBJ_GET_INFO_BY_FD`.
#[repr(C)]
#[derive(Default)]
struct InfoAttr {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

/// The head of `struct bpf_prog_info`; the kernel fills only `info_len` bytes.
#[repr(C)]
#[derive(Default)]
struct ProgInfoHead {
    prog_type: u32,
    id: u32,
}

/// Runs `bpf(cmd, attr, sizeof attr)`.
///
/// # Safety
/// Every pointer stored (as `u64`) in `attr` must point to memory valid for
/// the access the kernel makes for `cmd` for the duration of the call.
unsafe fn sys_bpf<T>(cmd: libc::c_int, attr: &mut T) -> Result<c_long, Errno> {
    let size = std::mem::size_of::<T>() as libc::c_uint;
    // SAFETY: `attr` is a live, exclusively borrowed `#[repr(C)]` prefix of
    // `union bpf_attr` of exactly `size` bytes (the kernel zero-extends
    // shorter attrs); the pointers inside it are valid per this function's
    // contract.
    let ret = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr as *mut T, size) };
    if ret < 0 {
        Err(Errno::last())
    } else {
        Ok(ret)
    }
}

/// Turns a descriptor returned by `bpf(2)` into an owned one.
fn owned_fd(ret: c_long) -> OwnedFd {
    // SAFETY: `ret` is a non-negative file descriptor the kernel just
    // created for us (bpf(2) returns new fds with O_CLOEXEC); nothing else
    // owns it.
    unsafe { OwnedFd::from_raw_fd(ret as RawFd) }
}

/// A device program loaded into the kernel, not yet attached.
#[derive(Debug)]
pub struct LoadedProgram {
    fd: OwnedFd,
    id: u32,
}

/// Loads `insns` as a `BPF_PROG_TYPE_CGROUP_DEVICE` program. If the kernel
/// refuses it, loads it again with the verifier log on so the error says why.
pub fn load(insns: &[BpfInsn]) -> Result<LoadedProgram, DeviceError> {
    let fd = match load_with_log(insns, None) {
        Ok(fd) => fd,
        Err(first) => {
            let mut log = vec![0u8; LOG_SIZE];
            match load_with_log(insns, Some(&mut log)) {
                Ok(fd) => fd,
                Err(_) => {
                    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                    let verifier_log = String::from_utf8_lossy(&log[..end]).trim().to_owned();
                    return Err(DeviceError::BpfLoad {
                        errno: first,
                        insns: insns.len(),
                        verifier_log,
                    });
                }
            }
        }
    };
    let id = prog_id(&fd)?;
    tracing::debug!(prog_id = id, insns = insns.len(), "device program loaded");
    Ok(LoadedProgram { fd, id })
}

fn load_with_log(insns: &[BpfInsn], log: Option<&mut Vec<u8>>) -> Result<OwnedFd, Errno> {
    let mut attr = ProgLoadAttr {
        prog_type: BPF_PROG_TYPE_CGROUP_DEVICE,
        insn_cnt: u32::try_from(insns.len()).map_err(|_| Errno::E2BIG)?,
        insns: insns.as_ptr() as u64,
        license: LICENSE.as_ptr() as u64,
        ..Default::default()
    };
    attr.prog_name[..PROG_NAME.len()].copy_from_slice(PROG_NAME);
    if let Some(log) = log {
        attr.log_level = 1;
        attr.log_size = u32::try_from(log.len()).map_err(|_| Errno::EINVAL)?;
        attr.log_buf = log.as_mut_ptr() as u64;
    }
    // SAFETY: `insns` (insn_cnt 8-byte `struct bpf_insn`s), the
    // NUL-terminated `LICENSE` and the optional log buffer (`log_size`
    // writable bytes) all outlive the call.
    let ret = unsafe { sys_bpf(BPF_PROG_LOAD, &mut attr) }?;
    Ok(owned_fd(ret))
}

fn prog_id(fd: &OwnedFd) -> Result<u32, DeviceError> {
    let mut info = ProgInfoHead::default();
    let mut attr = InfoAttr {
        bpf_fd: fd.as_raw_fd() as u32,
        info_len: std::mem::size_of::<ProgInfoHead>() as u32,
        info: &mut info as *mut ProgInfoHead as u64,
    };
    // SAFETY: `info` is `info_len` writable bytes that outlive the call.
    unsafe { sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr) }
        .map_err(|errno| DeviceError::BpfInfo { errno })?;
    Ok(info.id)
}

fn open_cgroup_dir(dir: &Path) -> Result<File, DeviceError> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY)
        .open(dir)
        .map_err(|source| DeviceError::CgroupOpen {
            path: dir.to_path_buf(),
            source,
        })
}

impl LoadedProgram {
    /// The kernel's id of the program (as `bpftool prog` lists it).
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Attaches the program to the cgroup v2 directory `unified_cgroup_dir`
    /// with `BPF_F_ALLOW_MULTI`. On failure the program is unloaded.
    pub fn attach(self, unified_cgroup_dir: &Path) -> Result<AttachedFilter, DeviceError> {
        let dir = open_cgroup_dir(unified_cgroup_dir)?;
        let mut attr = ProgAttachAttr {
            target_fd: dir.as_raw_fd() as u32,
            attach_bpf_fd: self.fd.as_raw_fd() as u32,
            attach_type: BPF_CGROUP_DEVICE,
            attach_flags: BPF_F_ALLOW_MULTI,
            replace_bpf_fd: 0,
        };
        // SAFETY: the attr holds only descriptors, no pointers.
        unsafe { sys_bpf(BPF_PROG_ATTACH, &mut attr) }.map_err(|errno| DeviceError::BpfAttach {
            path: unified_cgroup_dir.to_path_buf(),
            errno,
        })?;
        tracing::debug!(
            prog_id = self.id,
            cgroup = %unified_cgroup_dir.display(),
            "device program attached"
        );
        Ok(AttachedFilter {
            prog: self.fd,
            prog_id: self.id,
            cgroup: unified_cgroup_dir.to_path_buf(),
            table: None,
        })
    }
}

/// Loads the program generated from `rules` and attaches it to the cgroup
/// v2 directory `unified_cgroup_dir` (`BPF_CGROUP_DEVICE`,
/// `BPF_F_ALLOW_MULTI`). The returned handle owns the program descriptor;
/// dropping it leaves the filter attached (see the module doc).
pub fn attach(
    unified_cgroup_dir: &Path,
    rules: &DeviceRules,
) -> Result<AttachedFilter, DeviceError> {
    load(&program::generate(rules))?.attach(unified_cgroup_dir)
}

/// Like [`attach`], with a device table ([`program::generate_with_table`]):
/// `rules`' exact devices go in the table, filled and read back before the
/// program is loaded, and only its wildcard rules are blocks of the program
/// ([`program::split_for_table`]), which makes it several times cheaper
/// to verify. The filter can later be widened by exact devices
/// ([`AttachedFilter::table_mut`]) without a new program. Rules with more
/// exact devices than the table holds stay blocks, with an empty table.
pub fn attach_with_table(
    unified_cgroup_dir: &Path,
    rules: &DeviceRules,
) -> Result<AttachedFilter, DeviceError> {
    let (program, table) = load_with_table(rules)?;
    let mut filter = program.attach(unified_cgroup_dir)?;
    filter.table = Some(table);
    Ok(filter)
}

/// The program of [`attach_with_table`] and its table, loaded but not
/// attached (the table must live as long as the handle that extends it).
pub fn load_with_table(rules: &DeviceRules) -> Result<(LoadedProgram, DeviceTable), DeviceError> {
    let (blocks, exact) = match program::split_for_table(rules) {
        (blocks, exact) if exact.len() <= TABLE_CAPACITY as usize => (blocks, exact),
        _ => (rules.clone(), Vec::new()),
    };
    let mut table = DeviceTable::create()?;
    if !exact.is_empty() {
        table.extend(&exact)?;
    }
    let program = load(&program::generate_with_table(&blocks, table.raw_fd()))?;
    Ok((program, table))
}

/// A device program attached to a cgroup v2 directory.
#[derive(Debug)]
pub struct AttachedFilter {
    prog: OwnedFd,
    prog_id: u32,
    cgroup: PathBuf,
    /// The program's device table, if it was generated with one.
    table: Option<DeviceTable>,
}

impl AttachedFilter {
    /// The kernel's id of the attached program.
    pub fn prog_id(&self) -> u32 {
        self.prog_id
    }

    /// The cgroup directory it is attached to.
    pub fn cgroup_dir(&self) -> &Path {
        &self.cgroup
    }

    /// The program's device table ([`attach_with_table`]), if any.
    pub fn table_mut(&mut self) -> Option<&mut DeviceTable> {
        self.table.as_mut()
    }

    /// Detaches the program from the cgroup (it is then unloaded when our
    /// descriptor closes). Only for a cgroup that lives on; a cgroup being
    /// removed takes its programs with it.
    pub fn detach(self) -> Result<(), DeviceError> {
        let dir = open_cgroup_dir(&self.cgroup)?;
        let mut attr = ProgAttachAttr {
            target_fd: dir.as_raw_fd() as u32,
            attach_bpf_fd: self.prog.as_raw_fd() as u32,
            attach_type: BPF_CGROUP_DEVICE,
            ..Default::default()
        };
        // SAFETY: the attr holds only descriptors, no pointers.
        unsafe { sys_bpf(BPF_PROG_DETACH, &mut attr) }.map_err(|errno| DeviceError::BpfDetach {
            path: self.cgroup.clone(),
            errno,
        })?;
        tracing::debug!(prog_id = self.prog_id, cgroup = %self.cgroup.display(), "device program detached");
        Ok(())
    }
}

/// Ids of the device programs attached directly to `unified_cgroup_dir`
/// (not those inherited from ancestors), in the order the kernel runs them.
pub fn attached_program_ids(unified_cgroup_dir: &Path) -> Result<Vec<u32>, DeviceError> {
    let dir = open_cgroup_dir(unified_cgroup_dir)?;
    let query_err = |errno| DeviceError::BpfQuery {
        path: unified_cgroup_dir.to_path_buf(),
        errno,
    };
    loop {
        let mut count = ProgQueryAttr {
            target_fd: dir.as_raw_fd() as u32,
            attach_type: BPF_CGROUP_DEVICE,
            ..Default::default()
        };
        // SAFETY: `prog_ids` is null, so the kernel only writes the attr.
        unsafe { sys_bpf(BPF_PROG_QUERY, &mut count) }.map_err(query_err)?;
        if count.prog_cnt == 0 {
            return Ok(Vec::new());
        }
        let mut ids = vec![0u32; count.prog_cnt as usize];
        let mut attr = ProgQueryAttr {
            target_fd: dir.as_raw_fd() as u32,
            attach_type: BPF_CGROUP_DEVICE,
            prog_ids: ids.as_mut_ptr() as u64,
            prog_cnt: count.prog_cnt,
            ..Default::default()
        };
        // SAFETY: `ids` has room for `prog_cnt` u32s and outlives the call.
        match unsafe { sys_bpf(BPF_PROG_QUERY, &mut attr) } {
            Ok(_) => {
                ids.truncate(attr.prog_cnt as usize);
                return Ok(ids);
            }
            // A program was attached between the two calls: ask again.
            Err(Errno::ENOSPC) => continue,
            Err(errno) => return Err(query_err(errno)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_layouts_match_the_kernel_abi() {
        assert_eq!(std::mem::size_of::<ProgLoadAttr>(), 72);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, prog_name), 48);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, expected_attach_type), 68);
        assert_eq!(std::mem::size_of::<ProgAttachAttr>(), 20);
        assert_eq!(std::mem::offset_of!(ProgQueryAttr, prog_ids), 16);
        assert_eq!(std::mem::offset_of!(ProgQueryAttr, prog_cnt), 24);
        assert_eq!(std::mem::size_of::<InfoAttr>(), 16);
        assert!(PROG_NAME.len() < 16);
        assert_eq!(LICENSE.last(), Some(&0));
    }
}
