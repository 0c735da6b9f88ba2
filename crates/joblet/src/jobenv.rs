//! The environment a job starts with: a small clean base (no daemon
//! variables leak in; a workflow's job also gets `JOBLET_WORKFLOW_ID`,
//! `JOBLET_WORKFLOW_JOB`, `JOBLET_WORKFLOW_ATTEMPT` and, when its run has a
//! shared volume, `JOBLET_WORKFLOW_SHARED`; a cluster job its node, attempt
//! and fencing token, and in a gang that spans nodes the rendezvous
//! PyTorch reads, see [`cluster`]), then its runtime's `environment`, then
//! the user's `--env`, then `--secret-env`.

use std::collections::BTreeMap;
use std::path::Path;

use joblet_core::{JobId, JobSpec};

pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

pub fn build(
    id: &JobId,
    spec: &JobSpec,
    secrets: &BTreeMap<String, String>,
    home: &Path,
    runtime: Option<&BTreeMap<String, String>>,
) -> BTreeMap<String, String> {
    let mut env = BTreeMap::from([
        ("PATH".to_owned(), DEFAULT_PATH.to_owned()),
        ("HOME".to_owned(), home.display().to_string()),
        ("LANG".to_owned(), "C.UTF-8".to_owned()),
        ("JOBLET_JOB_ID".to_owned(), id.to_string()),
    ]);
    if let Some(wf) = &spec.workflow {
        env.insert("JOBLET_WORKFLOW_ID".into(), wf.id.clone());
        env.insert("JOBLET_WORKFLOW_JOB".into(), wf.job.clone());
        env.insert("JOBLET_WORKFLOW_ATTEMPT".into(), wf.attempt.to_string());
        if let Some(shared) = &wf.shared {
            env.insert("JOBLET_WORKFLOW_SHARED".into(), shared.clone());
        }
    }
    if let Some(c) = &spec.cluster {
        cluster(&mut env, id, c);
    }
    if let Some(r) = runtime {
        env.extend(r.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    env.extend(spec.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    env.extend(secrets.iter().map(|(k, v)| (k.clone(), v.clone())));
    env
}

/// A cluster job's variables. `JOBLET_JOB_ID` is the job's id cluster-wide
/// (`JOBLET_RUN_ID` this node's run of it); `JOBLET_ATTEMPT` and
/// `JOBLET_FENCE` let the job's own checkpoint writer refuse a stale
/// attempt (a larger pair wins). A gang that spans nodes runs its command
/// once per node: `RANK`/`WORLD_SIZE`/`LOCAL_RANK` count those processes
/// (torch.distributed with one process per node), `NODE_RANK`/`NNODES`/
/// `NPROC_PER_NODE` are what `torchrun --nnodes=$NNODES
/// --node_rank=$NODE_RANK --nproc_per_node=$NPROC_PER_NODE` takes to start
/// one worker per GPU, all meeting at `MASTER_ADDR:MASTER_PORT`.
fn cluster(env: &mut BTreeMap<String, String>, id: &JobId, c: &joblet_core::ClusterRun) {
    let mut set = |k: &str, v: String| {
        env.insert(k.to_owned(), v);
    };
    set("JOBLET_JOB_ID", c.job.clone());
    set("JOBLET_RUN_ID", id.to_string());
    set("JOBLET_NODE", c.node.clone());
    set("JOBLET_ATTEMPT", c.attempt.to_string());
    set("JOBLET_FENCE", c.fence.to_string());
    if let Some(g) = &c.gang {
        set("JOBLET_NODE_RANK", g.node_rank.to_string());
        set("JOBLET_GPU_WORLD_SIZE", g.world_size.to_string());
        set("JOBLET_GPU_RANK_BASE", g.rank_base.to_string());
        set("MASTER_ADDR", g.master_addr.clone());
        set("MASTER_PORT", g.master_port.to_string());
        set("NODE_RANK", g.node_rank.to_string());
        set("NNODES", g.nodes.to_string());
        set("NPROC_PER_NODE", g.local_size.to_string());
        set("RANK", g.node_rank.to_string());
        set("WORLD_SIZE", g.nodes.to_string());
        set("LOCAL_RANK", "0".to_string());
        set("LOCAL_WORLD_SIZE", "1".to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_values_override_the_base_and_nothing_leaks() {
        let id = JobId::parse("00000000-0000-4000-8000-000000000001").unwrap();
        let req = joblet_core::JobRequest {
            command: "x".into(),
            env: vec![("PATH".into(), "/opt/bin".into())],
            secret_env: vec![("TOKEN".into(), "t".into())],
            ..Default::default()
        };
        let (spec, secrets) = req.validate().unwrap();
        let runtime = BTreeMap::from([
            ("PATH".to_owned(), "/opt/venv/bin:/usr/bin".to_owned()),
            ("PYTHONUNBUFFERED".to_owned(), "1".to_owned()),
        ]);
        let env = build(&id, &spec, &secrets, Path::new("/w"), Some(&runtime));
        assert_eq!(env["PATH"], "/opt/bin");
        assert_eq!(env["PYTHONUNBUFFERED"], "1");
        let env = build(&id, &spec, &secrets, Path::new("/w"), None);
        assert!(!env.contains_key("PYTHONUNBUFFERED"));
        assert_eq!(env["TOKEN"], "t");
        assert_eq!(env["HOME"], "/w");
        assert!(!env.contains_key("RUST_LOG"));
        assert!(!env.contains_key("JOBLET_WORKFLOW_ID"));
    }

    #[test]
    fn a_workflow_job_knows_its_run_job_attempt_and_shared_volume() {
        let id = JobId::parse("00000000-0000-4000-8000-000000000001").unwrap();
        let (mut spec, _) = joblet_core::JobRequest {
            command: "x".into(),
            ..Default::default()
        }
        .validate()
        .unwrap();
        spec.workflow = Some(joblet_core::WorkflowJobRef {
            id: "3f2a9c1e-0000-4000-8000-000000000009".into(),
            job: "model-training".into(),
            attempt: 2,
            shared: Some("/volumes/wf-3f2a9c1e".into()),
        });
        let env = build(&id, &spec, &BTreeMap::new(), Path::new("/work"), None);
        assert_eq!(
            env["JOBLET_WORKFLOW_ID"],
            "3f2a9c1e-0000-4000-8000-000000000009"
        );
        assert_eq!(env["JOBLET_WORKFLOW_JOB"], "model-training");
        assert_eq!(env["JOBLET_WORKFLOW_ATTEMPT"], "2");
        assert_eq!(env["JOBLET_WORKFLOW_SHARED"], "/volumes/wf-3f2a9c1e");
    }
}
