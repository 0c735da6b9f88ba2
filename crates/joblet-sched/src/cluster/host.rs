//! A node's host capacity besides its GPUs: CPU (millicores), memory (MiB)
//! and job slots; what a placement charges each node it touches, and
//! whether more fits.
//!
//! A dimension the node does not track (`None` in [`NodeCapacity`]) never
//! refuses anything. A charge of 0 CPU or 0 memory fits any node in that
//! dimension (it takes nothing), even one whose use is over its capacity
//! (a restore after the capacity was lowered); a job always takes a slot.

use crate::model::{JobRequest, NodeCapacity, Placement};

/// CPU, memory and jobs: what running jobs use on a node, or what one job
/// charges each node it runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HostLoad {
    pub cpu_millis: u64,
    pub memory_mb: u64,
    pub jobs: u32,
}

impl HostLoad {
    /// What the placement charges each node it touches.
    pub fn of(p: &Placement) -> HostLoad {
        HostLoad {
            cpu_millis: p.cpu_millis,
            memory_mb: p.host_memory_mb,
            jobs: 1,
        }
    }

    /// What a placement of the request would charge each node it touches.
    pub fn of_request(req: &JobRequest) -> HostLoad {
        HostLoad {
            cpu_millis: req.cpu_millis,
            memory_mb: req.host_memory_mb,
            jobs: 1,
        }
    }

    pub fn plus(self, o: HostLoad) -> HostLoad {
        HostLoad {
            cpu_millis: self.cpu_millis.saturating_add(o.cpu_millis),
            memory_mb: self.memory_mb.saturating_add(o.memory_mb),
            jobs: self.jobs.saturating_add(o.jobs),
        }
    }

    pub fn minus(self, o: HostLoad) -> HostLoad {
        HostLoad {
            cpu_millis: self.cpu_millis.saturating_sub(o.cpu_millis),
            memory_mb: self.memory_mb.saturating_sub(o.memory_mb),
            jobs: self.jobs.saturating_sub(o.jobs),
        }
    }
}

/// What is left of a node's capacity per dimension (`None`: not tracked).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Room {
    pub cpu_millis: Option<u64>,
    pub memory_mb: Option<u64>,
    pub jobs: Option<u32>,
}

impl Room {
    /// The room left on a node of capacity `cap` carrying `load`.
    pub fn left(cap: &NodeCapacity, load: HostLoad) -> Room {
        Room {
            cpu_millis: cap.cpu_millis.map(|c| c.saturating_sub(load.cpu_millis)),
            memory_mb: cap.memory_mb.map(|m| m.saturating_sub(load.memory_mb)),
            jobs: cap.max_jobs.map(|j| j.saturating_sub(load.jobs)),
        }
    }

    /// Whether `more` fits (a dimension asked 0 of always does).
    pub fn fits(&self, more: HostLoad) -> bool {
        self.refusal(more).is_none()
    }

    /// The first dimension `more` does not fit: (what, asked, left).
    pub fn refusal(&self, more: HostLoad) -> Option<(&'static str, u64, u64)> {
        let dims = [
            (MILLICORES, more.cpu_millis, self.cpu_millis),
            (MEMORY, more.memory_mb, self.memory_mb),
            (SLOTS, u64::from(more.jobs), self.jobs.map(u64::from)),
        ];
        dims.into_iter().find_map(|(what, asked, room)| match room {
            Some(left) if asked > 0 && asked > left => Some((what, asked, left)),
            _ => None,
        })
    }

    /// Takes `more` (which must fit) from the tracked dimensions.
    pub fn take(&mut self, more: HostLoad) {
        self.cpu_millis = self.cpu_millis.map(|c| c.saturating_sub(more.cpu_millis));
        self.memory_mb = self.memory_mb.map(|m| m.saturating_sub(more.memory_mb));
        self.jobs = self.jobs.map(|j| j.saturating_sub(more.jobs));
    }
}

/// Names of the dimensions, as errors print them.
pub(crate) const MILLICORES: &str = "millicores of CPU";
pub(crate) const MEMORY: &str = "MiB of memory";
pub(crate) const SLOTS: &str = "job slots";

/// Whether the capacity could ever hold one job of `load` (an empty node).
pub(crate) fn could_hold(cap: &NodeCapacity, load: HostLoad) -> bool {
    Room::left(cap, HostLoad::default()).fits(load)
}

/// A tracked dimension of `cap` that `load` exceeds: (what, used, capacity).
pub(crate) fn over(cap: &NodeCapacity, load: HostLoad) -> Option<(&'static str, u64, u64)> {
    let dims = [
        (MILLICORES, load.cpu_millis, cap.cpu_millis),
        (MEMORY, load.memory_mb, cap.memory_mb),
        (SLOTS, u64::from(load.jobs), cap.max_jobs.map(u64::from)),
    ];
    dims.into_iter()
        .find_map(|(what, used, cap)| cap.filter(|c| used > *c).map(|c| (what, used, c)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(cpu: u64, mem: u64, jobs: u32) -> HostLoad {
        HostLoad {
            cpu_millis: cpu,
            memory_mb: mem,
            jobs,
        }
    }

    #[test]
    fn untracked_dimensions_never_refuse_and_zero_always_fits() {
        let cap = NodeCapacity {
            cpu_millis: Some(4_000),
            memory_mb: None,
            max_jobs: Some(2),
        };
        let room = Room::left(&cap, load(3_000, 1 << 40, 1));
        assert!(room.fits(load(1_000, 1 << 40, 1)));
        assert!(!room.fits(load(1_001, 0, 1)), "CPU");
        assert_eq!(
            room.refusal(load(1_001, 0, 1)),
            Some((MILLICORES, 1_001, 1_000))
        );
        assert!(
            !Room::left(&cap, load(0, 0, 2)).fits(load(0, 0, 1)),
            "slots"
        );
        // Over capacity (a restore after the capacity was lowered): a job
        // asking no CPU still fits the CPU dimension.
        let over_cpu = Room::left(&cap, load(9_000, 0, 0));
        assert!(over_cpu.fits(load(0, 0, 1)));
        assert!(!over_cpu.fits(load(1, 0, 1)));
        assert_eq!(
            over(&cap, load(9_000, 0, 0)),
            Some((MILLICORES, 9_000, 4_000))
        );
        assert_eq!(over(&cap, load(4_000, 7, 2)), None);
    }

    #[test]
    fn taking_room_leaves_the_rest() {
        let cap = NodeCapacity {
            cpu_millis: Some(4_000),
            memory_mb: Some(1_024),
            max_jobs: None,
        };
        let mut room = Room::left(&cap, HostLoad::default());
        room.take(load(1_500, 1_000, 1));
        assert_eq!(
            room,
            Room {
                cpu_millis: Some(2_500),
                memory_mb: Some(24),
                jobs: None
            }
        );
        assert!(could_hold(&cap, load(4_000, 1_024, 1)));
        assert!(!could_hold(&cap, load(4_001, 0, 1)));
        assert!(!could_hold(
            &NodeCapacity {
                max_jobs: Some(0),
                ..cap
            },
            load(0, 0, 1)
        ));
    }
}
