//! The GPU audit log, for admins. The records are written by the engine.

use std::sync::Arc;

use joblet_core::record::AuditRecord;
use joblet_store::Store;

use super::admission::audit_since;
use super::{store_error, Access, ApiError, Caller};

/// The audit log's reader.
pub struct Audit {
    store: Arc<Store>,
}

/// Which records a caller asks for, as sent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditQuery {
    /// Records still open and those that ended at or after this time
    /// (Unix ms); 0 = all (negative is refused).
    pub since_ms: i64,
    /// Only this owner's; blank = everyone's.
    pub owner: String,
}

impl Audit {
    pub fn new(store: Arc<Store>) -> Audit {
        Audit { store }
    }

    /// The matching records, oldest first.
    pub fn list(&self, caller: &Caller, q: &AuditQuery) -> Result<Vec<AuditRecord>, ApiError> {
        caller.check(Access::Admin(
            "read the GPU audit log (it needs role admin)",
        ))?;
        let since = audit_since(q.since_ms)?;
        let owner = Some(q.owner.trim()).filter(|o| !o.is_empty());
        self.store.audit_query(since, owner).map_err(store_error)
    }
}
