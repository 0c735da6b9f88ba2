//! Interactive jobs driven through a real terminal: `rnx job run -it` in a
//! tmux pane (its own tmux server per test, `send-keys` to type and
//! `capture-pane` to read), on a node with simulated GPUs. Shown: only the
//! job's GPU node in its `/dev`, the terminal's size following the window,
//! Ctrl-C reaching the job, `exit 3` becoming rnx's code with the local
//! terminal as it was; detaching, `kill -9` of the daemon, a restart and
//! `rnx job attach` back into the same shell; `-i` as a pipe. Needs root
//! and tmux (scripts/setup.sh installs it).

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use joblet_e2e::SimGpuNode;

/// A tmux server of this test's own, with one window running a plain
/// shell whose rnx talks to the node; killed on drop.
struct Terminal {
    /// The tmux server's socket, inside `dir` (gone with it).
    socket: PathBuf,
    dir: tempfile::TempDir,
}

impl Terminal {
    fn start(node: &SimGpuNode, cols: u16, rows: u16) -> Terminal {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("tmux.sock");
        let rnx_dir = joblet_e2e::bin_dir();
        let shell = format!(
            "env -i PATH={}:/usr/bin:/bin HOME={} TERM=xterm PS1='host$ ' RNX_CONFIG={} bash --norc --noprofile",
            rnx_dir.display(),
            dir.path().display(),
            node.client_config().display()
        );
        let t = Terminal { socket, dir };
        t.tmux(&[
            "new-session",
            "-d",
            "-s",
            "main",
            "-x",
            &cols.to_string(),
            "-y",
            &rows.to_string(),
            &shell,
        ]);
        t.wait_for("host$", "the shell's prompt");
        t
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux (installed by scripts/setup.sh)");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Types `text` and Enter.
    fn line(&self, text: &str) {
        self.tmux(&["send-keys", "-t", "main", "-l", text]);
        self.tmux(&["send-keys", "-t", "main", "Enter"]);
    }

    /// Sends one key as tmux names it (`C-c`, `C-p`).
    fn key(&self, key: &str) {
        self.tmux(&["send-keys", "-t", "main", key]);
    }

    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-J", "-t", "main", "-S", "-200"])
    }

    /// Waits until the screen shows `needle` after everything it showed
    /// when `mark` was taken; returns the screen.
    fn wait_after(&self, mark: usize, needle: &str, what: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let screen = self.screen();
            let tail = screen.get(mark.min(screen.len())..).unwrap_or("");
            if tail.contains(needle) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: {needle:?} not on the screen within 20 s:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn wait_for(&self, needle: &str, what: &str) -> String {
        self.wait_after(0, needle, what)
    }

    /// Where the screen's text ends now (for [`Terminal::wait_after`]).
    fn mark(&self) -> usize {
        self.screen().trim_end().len()
    }

    /// Ctrl-C during `sleep 100` at the shell's prompt interrupts the sleep
    /// (what follows it on the line never runs) and leaves `shell` taking
    /// commands. (Each marker is typed split, so only the output shows it
    /// whole.)
    fn ctrl_c_interrupts_sleep(&self, shell: &str) {
        let m = self.mark();
        self.line("sleep 100; echo AFTER''-SLEEP");
        std::thread::sleep(Duration::from_millis(500));
        self.key("C-c");
        self.line("echo STILL''-HERE");
        let screen = self.wait_after(m, "STILL-HERE", &format!("{shell} after Ctrl-C"));
        assert!(!screen[m..].contains("AFTER-SLEEP"), "{screen}");
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .status();
    }
}

fn node() -> SimGpuNode {
    SimGpuNode::start(4, "", "").expect("node")
}

#[test]
fn a_terminal_job_sees_its_gpu_follows_the_window_takes_ctrl_c_and_exits_with_its_code() {
    let node = node();
    let term = Terminal::start(&node, 100, 30);
    let before = term.file("stty.before");
    let after = term.file("stty.after");
    term.line(&format!("stty -a > {}", before.display()));
    term.line("rnx job run -it --gpu=1 -e PS1='jo''b$ ' -- bash --norc --noprofile");
    term.wait_for("job$", "the job's shell prompt");

    // Its /dev holds exactly one GPU node, the control node and uvm.
    let m = term.mark();
    // (Each marker is typed split, so that only the output shows it whole.)
    term.line("ls /dev | grep nvidia | tr '\\n' ' '; echo E''ND");
    let screen = term.wait_after(m, "END", "ls /dev");
    let line = screen[m..]
        .lines()
        .find(|l| l.contains("END") && !l.contains("grep"))
        .unwrap()
        .to_string();
    let nodes: Vec<&str> = line.split_whitespace().filter(|w| *w != "END").collect();
    assert_eq!(nodes.len(), 3, "{line}");
    assert!(
        nodes.contains(&"nvidiactl") && nodes.contains(&"nvidia-uvm"),
        "{line}"
    );
    assert!(
        nodes
            .iter()
            .any(|n| n.len() == 7 && n.starts_with("nvidia")),
        "one GPU node: {line}"
    );

    // The terminal's size is the window's, and follows it.
    let m = term.mark();
    term.line("echo COLS=$(tput cols)");
    term.wait_after(m, "COLS=100", "tput cols");
    term.tmux(&["resize-window", "-t", "main", "-x", "132", "-y", "40"]);
    std::thread::sleep(Duration::from_millis(300));
    let m = term.mark();
    term.line("echo COLS=$(tput cols)");
    term.wait_after(m, "COLS=132", "tput cols after a resize");
    term.tmux(&["resize-window", "-t", "main", "-x", "100", "-y", "30"]);

    // Ctrl-C interrupts the foreground command, not the shell or rnx.
    term.ctrl_c_interrupts_sleep("the shell");

    // exit 3: rnx exits 3 and the local terminal is as it was.
    let m = term.mark();
    term.line("exit 3");
    term.wait_after(m, "host$", "back at the host's shell");
    term.line(&format!("echo RC=$?; stty -a > {}", after.display()));
    term.wait_after(m, "RC=3", "rnx's exit code");
    std::thread::sleep(Duration::from_millis(200));
    // The window is back at its first size: everything is as it was.
    assert_eq!(
        std::fs::read_to_string(&before).unwrap(),
        std::fs::read_to_string(&after).unwrap(),
        "the local terminal's settings changed"
    );
}

#[test]
fn detach_kill_the_daemon_restart_and_attach_back_into_the_same_shell() {
    let mut node = node();
    let term = Terminal::start(&node, 100, 30);
    term.line("rnx job run -it -e PS1='jo''b$ ' -- bash --norc --noprofile");
    term.wait_for("job$", "the job's shell prompt");
    term.line("SECRET_WORD=kept-in-the-shell");

    // One writer at a time; watchers read along.
    let running = node.rnx_json(&["job", "list", "--state", "running"]);
    let id = running[0]["id"].as_str().unwrap().to_string();
    let second = node.rnx(&["job", "attach", &id]);
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(
        !second.status.success() && err.contains("another client is attached"),
        "{err}"
    );
    let mut watcher = node
        .rnx_cmd()
        .args(["job", "attach", "--read-only", &id])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let _ = watcher.kill();
    let watched = watcher.wait_with_output().unwrap();
    assert!(
        String::from_utf8_lossy(&watched.stdout).contains("SECRET_WORD=kept-in-the-shell"),
        "the watcher sees the screen"
    );

    let m = term.mark();
    term.key("C-p");
    term.key("C-q");
    let screen = term.wait_after(m, "host$", "detached");
    assert!(screen.contains("detached from job"), "{screen}");

    node.kill_daemon();
    node.restart().expect("restart");

    let m = term.mark();
    term.line(&format!("rnx job attach {id}"));
    // The last screenful comes back first: the prompt.
    term.wait_after(m, "job$", "the job's output replayed on attach");
    let m = term.mark();
    term.line("echo WORD=$SECRET_WORD");
    term.wait_after(
        m,
        "WORD=kept-in-the-shell",
        "the same shell after the restart",
    );
    term.line("exit 0");
    let done = node.wait_done(&id, Duration::from_secs(20));
    assert_eq!(done["state"], "COMPLETED", "{done}");
}

#[test]
fn dash_i_streams_a_pipe_and_bad_attaches_are_refused() {
    let node = node();
    let out = node
        .rnx_cmd()
        .args([
            "job",
            "run",
            "-i",
            "--",
            "sh",
            "-c",
            "test -t 0 || echo NOT-A-TTY; wc -l",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(b"one\ntwo\nthree\n")?;
            c.wait_with_output()
        })
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("NOT-A-TTY") && text.contains('3'), "{text}");

    // A batch job takes no input.
    let id = node.run(&["sleep", "30"]);
    let out = node.rnx(&["job", "attach", id.trim()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("without -i or -t"), "{err}");
    node.rnx_ok(&["job", "kill", id.trim()]);
}

#[test]
fn a_lost_connection_leaves_the_local_terminal_as_it_was() {
    let mut node = node();
    let term = Terminal::start(&node, 100, 30);
    let before = term.file("stty.before");
    let after = term.file("stty.after");
    term.line(&format!("stty -a > {}", before.display()));
    term.line("rnx job run -it -e PS1='jo''b$ ' -- bash --norc --noprofile");
    term.wait_for("job$", "the job's shell prompt");
    // The daemon dies under the attached client.
    let m = term.mark();
    node.kill_daemon();
    term.wait_after(m, "host$", "rnx gives up on the lost connection");
    term.line(&format!("echo RC=$?; stty -a > {}", after.display()));
    let screen = term.wait_after(m, "RC=", "rnx's exit code");
    assert!(
        !screen[m..].contains("RC=0"),
        "a lost connection is not success:\n{screen}"
    );
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        std::fs::read_to_string(&before).unwrap(),
        std::fs::read_to_string(&after).unwrap(),
        "the local terminal's settings changed"
    );
}

#[test]
fn exec_dash_it_gives_a_terminal_inside_a_running_job() {
    let node = node();
    let id = node.run(&["--", "sleep", "60"]);
    let term = Terminal::start(&node, 90, 25);
    term.line(&format!("rnx job exec -it -e PS1='ex''ec$ ' {id} -- sh"));
    term.wait_for("exec$", "the exec's shell prompt");
    let m = term.mark();
    term.line("echo SIZE=$(stty size | tr ' ' x)");
    term.wait_after(m, "SIZE=25x90", "the exec's terminal has the window's size");
    term.ctrl_c_interrupts_sleep("the exec's shell");
    let m = term.mark();
    term.line("exit 4");
    term.wait_after(m, "host$", "back at the host's shell");
    term.line("echo RC=$?");
    term.wait_after(m, "RC=4", "rnx's exit code is the command's");
    node.rnx_ok(&["job", "kill", &id]);
}
