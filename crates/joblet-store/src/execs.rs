//! The audit of processes run inside jobs (schema step 9, `job_execs`):
//! one row per `rnx job exec`, written when it starts and completed when
//! it ends.

use joblet_core::UnixMillis;
use rusqlite::{params, Row};

use crate::{SqlContext, Store, StoreError};

/// One exec into a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecRecord {
    pub id: i64,
    pub job_id: String,
    /// Who ran it.
    pub caller: String,
    /// The command and its arguments.
    pub argv: Vec<String>,
    pub tty: bool,
    pub started_ms: UnixMillis,
    /// `None` while it runs, or if the daemon stopped before it ended.
    pub ended_ms: Option<UnixMillis>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
}

const COLUMNS: &str = "id, job_id, caller, argv, tty, started_ms, ended_ms, exit_code, signal";

fn from_row(r: &Row<'_>) -> rusqlite::Result<(ExecRecord, String)> {
    let argv: String = r.get(3)?;
    Ok((
        ExecRecord {
            id: r.get(0)?,
            job_id: r.get(1)?,
            caller: r.get(2)?,
            argv: Vec::new(),
            tty: r.get::<_, i64>(4)? != 0,
            started_ms: r.get(5)?,
            ended_ms: r.get(6)?,
            exit_code: r.get(7)?,
            signal: r.get(8)?,
        },
        argv,
    ))
}

impl Store {
    /// Records an exec as it starts; returns its id.
    pub fn exec_started(
        &self,
        job_id: &str,
        caller: &str,
        argv: &[String],
        tty: bool,
        started_ms: UnixMillis,
    ) -> Result<i64, StoreError> {
        let argv = serde_json::to_string(argv).unwrap_or_else(|_| "[]".into());
        let conn = self.lock();
        conn.prepare_cached(
            "INSERT INTO job_execs (job_id, caller, argv, tty, started_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .and_then(|mut stmt| stmt.execute(params![job_id, caller, argv, i64::from(tty), started_ms]))
        .during(&self.path, || format!("record an exec into job {job_id}"))?;
        Ok(conn.last_insert_rowid())
    }

    /// Completes an exec's record with how it ended.
    pub fn exec_ended(
        &self,
        id: i64,
        ended_ms: UnixMillis,
        exit_code: Option<i32>,
        signal: Option<i32>,
    ) -> Result<(), StoreError> {
        self.lock()
            .prepare_cached(
                "UPDATE job_execs SET ended_ms = ?2, exit_code = ?3, signal = ?4 WHERE id = ?1",
            )
            .and_then(|mut stmt| stmt.execute(params![id, ended_ms, exit_code, signal]))
            .during(&self.path, || format!("record the end of exec {id}"))?;
        Ok(())
    }

    /// Every exec into `job_id`, oldest first.
    pub fn execs(&self, job_id: &str) -> Result<Vec<ExecRecord>, StoreError> {
        let rows = self
            .lock()
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM job_execs WHERE job_id = ?1 ORDER BY id"
            ))
            .and_then(|mut stmt| {
                stmt.query_map([job_id], from_row)?
                    .collect::<Result<Vec<_>, _>>()
            })
            .during(&self.path, || format!("read the execs into job {job_id}"))?;
        Ok(rows
            .into_iter()
            .map(|(mut rec, argv)| {
                rec.argv = serde_json::from_str(&argv).unwrap_or_else(|_| vec![argv]);
                rec
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exec_is_recorded_from_start_to_end() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db"), &dir.path().join("key")).unwrap();
        let argv = vec!["sh".to_string(), "-c".into(), "id -u".into()];
        let id = store
            .exec_started("job-1", "alice", &argv, true, 1_000)
            .unwrap();
        let open = store.execs("job-1").unwrap();
        assert_eq!(open.len(), 1);
        assert_eq!((open[0].ended_ms, open[0].exit_code), (None, None));
        store.exec_ended(id, 2_000, Some(3), None).unwrap();
        let done = store.execs("job-1").unwrap();
        assert_eq!(
            done,
            vec![ExecRecord {
                id,
                job_id: "job-1".into(),
                caller: "alice".into(),
                argv,
                tty: true,
                started_ms: 1_000,
                ended_ms: Some(2_000),
                exit_code: Some(3),
                signal: None,
            }]
        );
        assert!(store.execs("job-2").unwrap().is_empty());
    }
}
