//! `rnx workflow`'s syntax: clap derive structs, plain data.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::parsers;

pub(super) const WORKFLOW_AFTER_HELP: &str = "\
A workflow is a YAML file of jobs and the requirements between them
(docs/workflows.md). Each job takes the settings of `rnx job run` (command,
args, runtime, resources, uploads, volumes, environment, timeout) and may
retry; `requires: [- JOB: STATE]` holds it back until JOB ended COMPLETED,
FAILED or STOPPED (ANY: whatever became of it). Jobs whose requirements
hold run side by side through the node's scheduler; a job whose
requirement can no longer hold is CANCELED. Anyone may list and look at
workflows; run, stop and delete need an admin certificate.

A workflow file (pipeline.yaml):
  jobs:
    prep:
      command: python3
      args: [preprocess.py]
    train:
      command: python3
      args: [train.py, --epochs, \"100\"]
      requires:
        - prep: COMPLETED
      resources: {gpu_count: 2, gpu_memory_mb: 8GB}

Examples:
  rnx workflow validate pipeline.yaml
  rnx workflow run pipeline.yaml --follow
  rnx workflow list
  rnx workflow status 1a2b3c4d --detail
  rnx workflow logs 1a2b3c4d train
  rnx workflow stop 1a2b3c4d
  rnx workflow delete 1a2b3c4d";

const WORKFLOW_ID_HELP: &str = "Workflow id, or any unique prefix of it (see `rnx workflow list`)";

#[derive(Debug, Subcommand)]
pub enum WorkflowCommand {
    /// Admin: check a workflow file, upload its files and start it; print its id and jobs
    #[command(after_help = WORKFLOW_RUN_AFTER_HELP)]
    Run(WorkflowRunArgs),
    /// Check a workflow file here and on the node without running it; show its jobs by level
    #[command(after_help = WORKFLOW_VALIDATE_AFTER_HELP)]
    Validate(WorkflowFileArgs),
    /// One workflow: its state, and each job's state, time, GPUs and what it waits on
    #[command(after_help = WORKFLOW_STATUS_AFTER_HELP)]
    Status(WorkflowStatusArgs),
    /// Table of workflows, newest first: id, name, state, jobs done, created, duration
    #[command(
        after_help = "Examples:\n  rnx workflow list\n  rnx workflow list --limit 5\n  rnx --json workflow list | jq -r '.[] | select(.state == \"RUNNING\") | .id'"
    )]
    List(WorkflowListArgs),
    /// Print the output of a workflow's jobs (or of one job), one after the other
    #[command(after_help = WORKFLOW_LOGS_AFTER_HELP)]
    Logs(WorkflowLogsArgs),
    /// Admin: stop a workflow: stop its running jobs, cancel its waiting ones
    #[command(
        after_help = "The workflow ends STOPPED once its running jobs have ended (CANCELED if it\nhad not started yet). Its record and output stay until `rnx workflow delete`.\n\nExamples:\n  rnx workflow stop 1a2b3c4d"
    )]
    Stop(WorkflowRefArgs),
    /// Admin: delete an ended workflow: its jobs, their output, its uploads and shared volume
    #[command(
        after_help = "A workflow that has not ended is refused: stop it first (`rnx workflow stop`).\n\nExamples:\n  rnx workflow delete 1a2b3c4d"
    )]
    Delete(WorkflowRefArgs),
}

const WORKFLOW_RUN_AFTER_HELP: &str = "\
rnx reads FILE and checks it before sending anything: a mistake is shown as
FILE:LINE:COLUMN: what is wrong and what is accepted (exit code 2). Then it
uploads the jobs' files, starts the workflow, and prints its id and jobs.

Files: paths are relative to FILE's directory, and each job's /work holds
what is uploaded at those same paths. When every job lists `uploads:`, only
the union of those paths is uploaded (each job's /work gets its own);
otherwise FILE's whole directory is uploaded, recursively, hidden files
included. List `uploads:` in every job to send less; the node refuses an
upload over its limit.

Each job's /work is its own copy: what a job leaves for the jobs after it
goes to the run's shared volume, at $JOBLET_WORKFLOW_SHARED in every job
(mounted read-write; removed with `rnx workflow delete`).

With --follow rnx prints a line each time a job changes state, then the
final view, and exits 0 if the workflow COMPLETED and 1 if it ended FAILED,
STOPPED or CANCELED. Ctrl-C only stops following (exit 130): the workflow
keeps running on the node.

Examples:
  rnx workflow run pipeline.yaml
  rnx workflow run pipelines/nightly.yaml --follow
  ID=$(rnx --json workflow run pipeline.yaml | jq -r .id)";

const WORKFLOW_VALIDATE_AFTER_HELP: &str = "\
FILE is checked here first (keys and values, job names, requirements,
cycles, jobs that could never start, each job's request), then by the node,
for what only it knows (such as how many GPUs it has). Nothing is uploaded,
recorded or run. rnx prints the jobs by level: level 1 starts at once, each
later level once the jobs it requires ended as asked. A mistake is shown as
FILE:LINE:COLUMN: what is wrong (exit code 2 when found here, 1 when the
node refuses).

Examples:
  rnx workflow validate pipeline.yaml
  rnx --json workflow validate pipeline.yaml | jq -r '.jobs[].name'";

const WORKFLOW_STATUS_AFTER_HELP: &str = "\
A header (state, owner, times, outcome, shared volume), then one line per
job, in file order, indented under `└─` by its depth in the requirements: a
job hangs under the job it requires, and lists what it requires as
`(after a, b)` when that is not just the line it hangs under. Columns:
STATE, ATTEMPT (when jobs may retry), TIME (running or ran), GPUS (held, by
host index), and NOTE: what a waiting job waits on, or why a job ended
FAILED, STOPPED or CANCELED. --detail adds each job's command, the job id of
every attempt (for `rnx job status|log`), its exit code and retry time.

Examples:
  rnx workflow status 1a2b3c4d
  rnx workflow status 1a2b3c4d --detail
  rnx --json workflow status 1a2b3c4d | jq -r '.jobs[] | select(.state == \"FAILED\") | .name'";

const WORKFLOW_LOGS_AFTER_HELP: &str = "\
For each of the workflow's jobs that has been submitted (or only JOB): a
header `==> JOB (job ID, attempt N) <==`, then the output its latest attempt
has written so far, stdout and stderr kept apart as with `rnx job log`. For
an earlier attempt, use `rnx job log ID` with an id from
`rnx workflow status ID --detail`. With --json, one JSON object per line:
{\"job\", \"job_id\", \"attempt\", \"event\": \"output\", \"stream\", \"data\"}, and
{\"event\": \"ended\", \"state\", \"exit_code\"} where the node says how it ended.

Examples:
  rnx workflow logs 1a2b3c4d
  rnx workflow logs 1a2b3c4d model-training
  rnx --json workflow logs 1a2b3c4d | jq -r 'select(.stream == \"stderr\") | .data'";

#[derive(Debug, Args)]
pub struct WorkflowRunArgs {
    /// The workflow file (YAML)
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Print each job's state changes until the workflow ends; exit 0 if it COMPLETED, 1 otherwise
    #[arg(short = 'f', long)]
    pub follow: bool,
}

#[derive(Debug, Args)]
pub struct WorkflowFileArgs {
    /// The workflow file (YAML)
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
}

#[derive(Debug, Args)]
pub struct WorkflowRefArgs {
    #[arg(value_name = "ID", help = WORKFLOW_ID_HELP, value_parser = parsers::Clipped(parsers::workflow_ref))]
    pub id: String,
}

#[derive(Debug, Args)]
pub struct WorkflowStatusArgs {
    #[arg(value_name = "ID", help = WORKFLOW_ID_HELP, value_parser = parsers::Clipped(parsers::workflow_ref))]
    pub id: String,
    /// Also each job's command, job ids of every attempt, exit code and retry time
    #[arg(long)]
    pub detail: bool,
}

#[derive(Debug, Args)]
pub struct WorkflowListArgs {
    /// At most this many workflows (newest first); 0 = all
    #[arg(long, value_name = "N", value_parser = parsers::workflow_list_limit, allow_negative_numbers = true)]
    pub limit: Option<i64>,
}

#[derive(Debug, Args)]
pub struct WorkflowLogsArgs {
    #[arg(value_name = "ID", help = WORKFLOW_ID_HELP, value_parser = parsers::Clipped(parsers::workflow_ref))]
    pub id: String,
    /// Only this job (its name in the workflow file)
    #[arg(value_name = "JOB")]
    pub job: Option<String>,
}
