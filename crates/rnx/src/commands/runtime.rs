//! `rnx runtime list|info|install|build|remove|test`.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use joblet_proto::pb;
use tonic::Streaming;

use super::Ctx;
use crate::error::Error;
use crate::exit;
use crate::printer::{human_bytes, Printer};
use crate::runtime_files;
use crate::runtime_view::{progress_line, InstalledView, PlainProgress, RuntimeView};
use crate::settings::RuntimeAction;

pub async fn run(mut ctx: Ctx, action: RuntimeAction) -> Result<u8, Error> {
    let address = ctx.node.address.clone();
    let status_err = |s| Error::from_status(&address, s);
    let mut printer = Printer::new(ctx.format, std::io::stdout());
    match action {
        RuntimeAction::List { all } => {
            let r = ctx
                .runtime
                .list_runtimes(pb::ListRuntimesRequest {
                    include_available: all,
                })
                .await
                .map_err(status_err)?
                .into_inner();
            let views: Vec<RuntimeView> = r.runtimes.iter().map(RuntimeView::from).collect();
            printer
                .runtime_list(&views, super::job::now_ms())
                .map_err(Error::Output)?;
        }
        RuntimeAction::Info { name } => {
            let r = ctx
                .runtime
                .get_runtime(pb::RuntimeRef { name })
                .await
                .map_err(status_err)?
                .into_inner();
            printer
                .runtime_info(&RuntimeView::from(&r), super::job::now_ms())
                .map_err(Error::Output)?;
        }
        RuntimeAction::Install {
            name,
            extras,
            rebuild,
        } => {
            let started = Instant::now();
            let stream = ctx
                .runtime
                .install_runtime(pb::InstallRuntimeRequest {
                    name,
                    extras,
                    rebuild,
                })
                .await
                .map_err(status_err)?
                .into_inner();
            let info = follow_progress(stream, "InstallRuntime", &address).await?;
            printer
                .runtime_installed(&installed(&info, started))
                .map_err(Error::Output)?;
        }
        RuntimeAction::Build {
            path,
            extras,
            rebuild,
        } => {
            let collected = runtime_files::collect(&path)?;
            // Best effort, like the progress it precedes.
            let _ = writeln!(
                std::io::stderr(),
                "rnx: sending {} files ({}) from {}",
                collected.files.len(),
                human_bytes(collected.total),
                collected.dir.display()
            );
            let started = Instant::now();
            let stream = ctx
                .runtime
                .build_runtime(pb::BuildRuntimeRequest {
                    files: collected.files.into_iter().collect(),
                    extras,
                    rebuild,
                })
                .await
                .map_err(status_err)?
                .into_inner();
            let info = follow_progress(stream, "BuildRuntime", &address).await?;
            printer
                .runtime_installed(&installed(&info, started))
                .map_err(Error::Output)?;
        }
        RuntimeAction::Remove { name } => {
            let r = ctx
                .runtime
                .remove_runtime(pb::RuntimeRef { name })
                .await
                .map_err(status_err)?
                .into_inner();
            printer
                .runtime_removed(&RuntimeView::from(&r))
                .map_err(Error::Output)?;
        }
        RuntimeAction::Test { name, follow } => {
            let job = ctx
                .runtime
                .test_runtime(pb::RuntimeRef { name: name.clone() })
                .await
                .map_err(status_err)?
                .into_inner()
                .job
                .ok_or(Error::BadResponse {
                    call: "TestRuntime",
                    missing: "job",
                })?;
            let _ = writeln!(
                std::io::stderr(),
                "rnx: self-check of runtime {name} runs as job {}",
                job.id
            );
            let code = super::job::follow_to_end(ctx, &job.id, follow, None).await?;
            let verdict = if code == exit::SUCCESS {
                "passed".to_owned()
            } else {
                format!("failed (exit code {code})")
            };
            let _ = writeln!(
                std::io::stderr(),
                "rnx: self-check of runtime {name} {verdict}"
            );
            return Ok(code);
        }
    }
    Ok(exit::SUCCESS)
}

fn installed(info: &pb::RuntimeInfo, started: Instant) -> InstalledView {
    InstalledView {
        runtime: RuntimeView::from(info),
        elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    }
}

/// Shows the build's progress on stderr until its last event, and returns
/// the runtime that event carries.
async fn follow_progress(
    mut stream: Streaming<pb::RuntimeProgress>,
    call: &'static str,
    address: &str,
) -> Result<pb::RuntimeInfo, Error> {
    let mut shown = Shown::new();
    while let Some(p) = stream
        .message()
        .await
        .map_err(|s| Error::from_status(address, s))?
    {
        if let Some(info) = p.installed {
            shown.finish();
            return Ok(info);
        }
        shown.update(&p);
    }
    Err(Error::BadResponse {
        call,
        missing: "last event with the installed runtime (the stream ended without one)",
    })
}

/// Progress on stderr: a bar on a terminal, else a line per change.
enum Shown {
    Bar {
        bar: indicatif::ProgressBar,
        /// The last event's phase and line.
        last: Option<(String, String)>,
        counting: Option<bool>,
    },
    Lines(PlainProgress),
}

impl Shown {
    fn new() -> Shown {
        if std::io::stderr().is_terminal() {
            let bar = indicatif::ProgressBar::new(0);
            bar.set_style(style(false));
            bar.set_message("waiting for the node");
            bar.enable_steady_tick(Duration::from_millis(120));
            Shown::Bar {
                bar,
                last: None,
                counting: Some(false),
            }
        } else {
            Shown::Lines(PlainProgress::default())
        }
    }

    fn update(&mut self, p: &pb::RuntimeProgress) {
        match self {
            Shown::Lines(plain) => {
                if let Some(line) = plain.line(p) {
                    let _ = writeln!(std::io::stderr(), "{line}");
                }
            }
            Shown::Bar {
                bar,
                last,
                counting,
            } => {
                // A finished phase stays on screen as a line.
                if let Some((_, line)) = last.as_ref().filter(|(phase, _)| *phase != p.phase) {
                    bar.println(line);
                }
                let count = p.total > 0;
                if *counting != Some(count) {
                    bar.set_style(style(count));
                    *counting = Some(count);
                }
                if count {
                    bar.set_length(p.total);
                    bar.set_position(p.done.min(p.total));
                }
                bar.set_prefix(p.phase.clone());
                bar.set_message(p.message.clone());
                *last = Some((p.phase.clone(), progress_line(p)));
            }
        }
    }

    fn finish(&mut self) {
        if let Shown::Bar { bar, last, .. } = self {
            if let Some((_, line)) = last.take() {
                bar.println(line);
            }
            bar.finish_and_clear();
        }
    }
}

impl Drop for Shown {
    /// A failed build leaves its last state on screen.
    fn drop(&mut self) {
        if let Shown::Bar { bar, .. } = self {
            if !bar.is_finished() {
                bar.abandon();
            }
        }
    }
}

fn style(counting: bool) -> indicatif::ProgressStyle {
    let template = if counting {
        "{prefix:>8} [{bar:30}] {pos}/{len} {wide_msg}"
    } else {
        "{prefix:>8} {spinner} {wide_msg}"
    };
    indicatif::ProgressStyle::with_template(template)
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> ")
}
