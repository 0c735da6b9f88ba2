//! Dropping the job's privileges: `no_new_privs`, the bounding and ambient
//! capability sets (while still able to), no supplementary groups, the
//! job's gid and uid, then the effective/permitted/inheritable sets; and a
//! read-back check that the result is what was asked for.

use std::collections::HashSet;
use std::sync::OnceLock;

use caps::{CapSet, Capability};
use nix::unistd::{setgroups, setresgid, setresuid, Gid, Uid};

use super::config::InitConfig;
use super::error::Stage;
use super::report::{Context, SetupError};

/// What a root job (uid 0 with `allow_root`) keeps: Docker's default set
/// without `CAP_MKNOD` and `CAP_NET_RAW`. Never `CAP_SYS_ADMIN`.
pub(crate) const ROOT_CAPS: [Capability; 12] = [
    Capability::CAP_CHOWN,
    Capability::CAP_DAC_OVERRIDE,
    Capability::CAP_FSETID,
    Capability::CAP_FOWNER,
    Capability::CAP_SETGID,
    Capability::CAP_SETUID,
    Capability::CAP_SETFCAP,
    Capability::CAP_SETPCAP,
    Capability::CAP_NET_BIND_SERVICE,
    Capability::CAP_SYS_CHROOT,
    Capability::CAP_KILL,
    Capability::CAP_AUDIT_WRITE,
];

/// The capabilities the job keeps: none unless it runs as uid 0.
pub(crate) fn kept(config: &InitConfig) -> HashSet<Capability> {
    if config.uid == 0 && config.allow_root {
        ROOT_CAPS.into_iter().collect()
    } else {
        HashSet::new()
    }
}

pub(crate) fn apply(config: &InitConfig) -> Result<(), SetupError> {
    let st = Stage::Privileges;
    nix::sys::prctl::set_no_new_privs().stage(st, || "prctl(PR_SET_NO_NEW_PRIVS)".into())?;
    let keep = kept(config);
    // Dropping from the bounding set needs CAP_SETPCAP: before setuid.
    drop_all_but(&keep, st, "")?;

    let gid = Gid::from_raw(config.gid);
    let uid = Uid::from_raw(config.uid);
    setgroups(&[]).stage(st, || "dropping supplementary groups".into())?;
    setresgid(gid, gid, gid).stage(st, || format!("setresgid({gid})"))?;
    setresuid(uid, uid, uid).stage(st, || format!("setresuid({uid})"))?;

    // A change to a non-zero uid already emptied these; set them anyway so
    // that a root job keeps exactly `keep` (effective first: it must stay
    // a subset of permitted).
    caps::set(None, CapSet::Effective, &keep).stage(st, || "setting the effective set".into())?;
    caps::set(None, CapSet::Permitted, &keep).stage(st, || "setting the permitted set".into())?;
    verify(&keep)
}

/// What pid 1 keeps once the job is forked: only `CAP_KILL`, to forward
/// signals to a job of another uid.
pub(crate) fn keep_only_kill() -> Result<(), SetupError> {
    let st = Stage::Fork;
    let keep: HashSet<Capability> = [Capability::CAP_KILL].into_iter().collect();
    drop_all_but(&keep, st, "pid 1 ")?;
    caps::set(None, CapSet::Effective, &keep)
        .stage(st, || "pid 1 setting the effective set".into())?;
    caps::set(None, CapSet::Permitted, &keep).stage(st, || "pid 1 setting the permitted set".into())
}

/// Drops every capability not in `keep` from the bounding set and clears
/// the ambient and inheritable sets; `who` prefixes the error context.
/// The capabilities this kernel knows, probed once (one `prctl` each) by
/// the outer process before it forks ([`probe_supported`]); pid 1 and the
/// job inherit the answer instead of probing again on the start path.
static SUPPORTED: OnceLock<HashSet<Capability>> = OnceLock::new();

/// Probes the kernel's capabilities now (see [`SUPPORTED`]).
pub(crate) fn probe_supported() {
    supported();
}

fn supported() -> &'static HashSet<Capability> {
    SUPPORTED.get_or_init(caps::runtime::thread_all_supported)
}

fn drop_all_but(keep: &HashSet<Capability>, st: Stage, who: &str) -> Result<(), SetupError> {
    // Dropping a capability the bounding set no longer has is a no-op, so
    // no read first; `verify` reads the result back.
    for &cap in supported() {
        if keep.contains(&cap) {
            continue;
        }
        caps::drop(None, CapSet::Bounding, cap)
            .stage(st, || format!("{who}dropping {cap} from the bounding set"))?;
    }
    caps::clear(None, CapSet::Ambient).stage(st, || format!("{who}clearing the ambient set"))?;
    caps::clear(None, CapSet::Inheritable)
        .stage(st, || format!("{who}clearing the inheritable set"))
}

fn verify(keep: &HashSet<Capability>) -> Result<(), SetupError> {
    let st = Stage::Privileges;
    for (set, want) in [
        (CapSet::Effective, keep.clone()),
        (CapSet::Permitted, keep.clone()),
        (CapSet::Inheritable, HashSet::new()),
        (CapSet::Ambient, HashSet::new()),
    ] {
        let got = caps::read(None, set).stage(st, || format!("reading {set:?}"))?;
        if got != want {
            return Err(SetupError::new(
                st,
                format!("{set:?} capabilities are {got:?} after dropping, expected {want:?}"),
            ));
        }
    }
    for &cap in supported() {
        let has = caps::has_cap(None, CapSet::Bounding, cap)
            .stage(st, || format!("reading bounding {cap}"))?;
        if has != keep.contains(&cap) {
            return Err(SetupError::new(
                st,
                format!("bounding set still has {cap} after dropping"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::init::config::tests::sample;

    #[test]
    fn only_a_root_job_keeps_capabilities_and_never_sys_admin() {
        let mut c = sample();
        assert!(kept(&c).is_empty());
        c.uid = 0;
        c.allow_root = true;
        let k = kept(&c);
        assert_eq!(k.len(), ROOT_CAPS.len());
        for bad in [
            Capability::CAP_SYS_ADMIN,
            Capability::CAP_SYS_MODULE,
            Capability::CAP_SYS_PTRACE,
            Capability::CAP_MKNOD,
            Capability::CAP_NET_RAW,
            Capability::CAP_NET_ADMIN,
            Capability::CAP_BPF,
            Capability::CAP_SYS_RAWIO,
        ] {
            assert!(!k.contains(&bad), "{bad}");
        }
        // gid 0 with a non-root uid keeps nothing.
        c.uid = 1000;
        c.gid = 0;
        assert!(kept(&c).is_empty());
    }
}
