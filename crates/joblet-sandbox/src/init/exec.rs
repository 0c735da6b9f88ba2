//! Finding the job's program (a `PATH` search in the job's own
//! environment when the command has no `/`) and turning the command line
//! and environment into what `execve` takes.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use nix::unistd::{access, AccessFlags};

use super::error::Stage;
use super::report::{Context, SetupError};

/// The search path when the job's environment has no `PATH`.
pub(crate) const DEFAULT_PATH: &str =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// A regular file this process may execute.
pub(crate) fn executable(path: &Path) -> bool {
    match std::fs::metadata(path) {
        Ok(m) => {
            m.is_file()
                && m.permissions().mode() & 0o111 != 0
                && access(path, AccessFlags::X_OK).is_ok()
        }
        Err(_) => false,
    }
}

/// Resolves `command`: as given if it contains a `/`, else the first
/// `is_exec` match in the job's `PATH` (empty entries mean the current
/// directory, as in POSIX shells).
pub(crate) fn resolve(
    command: &str,
    env: &BTreeMap<String, String>,
    is_exec: impl Fn(&Path) -> bool,
) -> Result<PathBuf, SetupError> {
    if command.contains('/') {
        return Ok(PathBuf::from(command));
    }
    let path = env.get("PATH").map(String::as_str).unwrap_or(DEFAULT_PATH);
    for dir in path.split(':') {
        let dir = if dir.is_empty() { "." } else { dir };
        let candidate = Path::new(dir).join(command);
        if is_exec(&candidate) {
            return Ok(candidate);
        }
    }
    Err(SetupError::new(
        Stage::Exec,
        format!("command not found: {command:?} is not an executable file in PATH={path}"),
    ))
}

/// `execve`'s arguments, built before the seccomp filter is loaded.
pub(crate) struct Prepared {
    pub program: CString,
    pub argv: Vec<CString>,
    pub envp: Vec<CString>,
}

fn cstring(what: &str, s: &str) -> Result<CString, SetupError> {
    CString::new(s)
        .map_err(|_| SetupError::new(Stage::Exec, format!("{what} contains a NUL byte: {s:?}")))
}

/// `execve`'s argument and environment vectors, which need no program
/// path yet (a prestarted job process builds them before its tree is
/// finished).
pub(crate) struct Arguments {
    pub argv: Vec<CString>,
    pub envp: Vec<CString>,
}

/// `argv[0]` is the command as given.
pub(crate) fn arguments(
    command: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
) -> Result<Arguments, SetupError> {
    let mut argv = vec![cstring("command", command)?];
    for a in args {
        argv.push(cstring("argument", a)?);
    }
    let envp = env
        .iter()
        .map(|(k, v)| cstring("environment", &format!("{k}={v}")))
        .collect::<Result<_, _>>()?;
    Ok(Arguments { argv, envp })
}

/// `program` (found already) with `arguments`.
pub(crate) fn with_program(program: &Path, arguments: Arguments) -> Result<Prepared, SetupError> {
    let program = program.to_str().ok_or_else(|| {
        SetupError::new(
            Stage::Exec,
            format!("program path {} is not UTF-8", program.display()),
        )
    })?;
    Ok(Prepared {
        program: cstring("program", program)?,
        argv: arguments.argv,
        envp: arguments.envp,
    })
}

/// The last steps before the command runs, shared by the job process and
/// an exec into it: every descriptor above stderr close-on-exec (the status
/// pipe, if any, must close at exec), then `execve`. Returns only on
/// failure, with the error naming `program` and the command as given.
pub(crate) fn exec_prepared(prepared: &Prepared, program: &Path, command: &str) -> SetupError {
    if let Err(e) = super::sys::close_range_cloexec(3) {
        return SetupError::new(
            Stage::Exec,
            format!("marking descriptors close-on-exec: {e}"),
        );
    }
    let err = match nix::unistd::execve(&prepared.program, &prepared.argv, &prepared.envp) {
        Ok(never) => match never {},
        Err(e) => e,
    };
    SetupError::new(
        Stage::Exec,
        format!("executing {} ({command}): {err}", program.display()),
    )
}

/// Takes standard input, a terminal, as the controlling terminal of the
/// session this process leads (a job or an exec started with `-t`).
pub(crate) fn take_terminal() -> Result<(), SetupError> {
    rustix::process::ioctl_tiocsctty(rustix::stdio::stdin())
        .map_err(std::io::Error::from)
        .stage(Stage::Exec, || {
            "taking the terminal on stdin as the controlling terminal".into()
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn env_with_path(p: &str) -> BTreeMap<String, String> {
        BTreeMap::from([("PATH".into(), p.into())])
    }

    #[test]
    fn path_search_uses_the_jobs_path_in_order() {
        let tmp = tempfile::tempdir().unwrap();
        let a = tmp.path().join("a");
        let b = tmp.path().join("b");
        fs::create_dir_all(&a).unwrap();
        fs::create_dir_all(&b).unwrap();
        for dir in [&a, &b] {
            let f = dir.join("tool");
            fs::write(&f, "#!/bin/sh\n").unwrap();
            fs::set_permissions(&f, fs::Permissions::from_mode(0o755)).unwrap();
        }
        // Not executable: skipped.
        fs::write(a.join("data"), "x").unwrap();
        fs::write(b.join("data"), "x").unwrap();
        fs::set_permissions(b.join("data"), fs::Permissions::from_mode(0o755)).unwrap();

        let env = env_with_path(&format!("{}:{}", a.display(), b.display()));
        assert_eq!(resolve("tool", &env, executable).unwrap(), a.join("tool"));
        assert_eq!(resolve("data", &env, executable).unwrap(), b.join("data"));
        let e = resolve("nope", &env, executable).unwrap_err();
        assert_eq!(e.stage, Stage::Exec);
        assert!(
            e.message.contains("command not found: \"nope\""),
            "{}",
            e.message
        );
        assert!(
            e.message.contains(&a.display().to_string()),
            "{}",
            e.message
        );
    }

    #[test]
    fn commands_with_a_slash_are_taken_as_given_and_default_path_applies() {
        let env = BTreeMap::new();
        assert_eq!(
            resolve("./run.sh", &env, |_| false).unwrap(),
            Path::new("./run.sh")
        );
        let seen = std::cell::RefCell::new(Vec::new());
        let _ = resolve("x", &env, |p| {
            seen.borrow_mut().push(p.to_path_buf());
            false
        });
        assert_eq!(seen.borrow().len(), DEFAULT_PATH.split(':').count());
        assert_eq!(seen.borrow()[0], Path::new("/usr/local/sbin/x"));
    }

    #[test]
    fn argv_starts_with_the_command_and_env_is_exact() {
        let env = BTreeMap::from([
            ("A".to_string(), "1".to_string()),
            ("B".into(), "x=y".into()),
        ]);
        let args = arguments("sh", &["-c".into(), "true".into()], &env).unwrap();
        let p = with_program(Path::new("/usr/bin/sh"), args).unwrap();
        assert_eq!(p.program.to_str().unwrap(), "/usr/bin/sh");
        let argv: Vec<&str> = p.argv.iter().map(|c| c.to_str().unwrap()).collect();
        assert_eq!(argv, ["sh", "-c", "true"]);
        let envp: Vec<&str> = p.envp.iter().map(|c| c.to_str().unwrap()).collect();
        assert_eq!(envp, ["A=1", "B=x=y"]);
    }
}
