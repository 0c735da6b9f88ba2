//! The simulator's own account of who holds which GPU, kept from the
//! Start / Exited stream independently of the scheduler: it measures
//! oversubscription (which must stay 0) and busy GPU·time.

use joblet_sched::model::GpuRef;

/// Units in use per GPU and per node, and their time integral.
#[derive(Debug, Clone)]
pub struct Ledger {
    gpus_per_node: u32,
    /// Holders per GPU, `[node * gpus_per_node + index]`.
    holders: Vec<u32>,
    /// Units in use per node.
    per_node: Vec<u32>,
    busy: u64,
    /// Worst seen: units beyond a node's capacity, or holders beyond one on
    /// an (exclusive) GPU.
    max_oversubscription: u64,
    area_unit_ms: u128,
    last_ms: u64,
}

impl Ledger {
    pub fn new(nodes: u32, gpus_per_node: u32) -> Ledger {
        Ledger {
            gpus_per_node,
            holders: vec![0; nodes as usize * gpus_per_node as usize],
            per_node: vec![0; nodes as usize],
            busy: 0,
            max_oversubscription: 0,
            area_unit_ms: 0,
            last_ms: 0,
        }
    }

    fn slot(&self, unit: &GpuRef) -> Result<usize, String> {
        if unit.node as usize >= self.per_node.len() || unit.index >= self.gpus_per_node {
            return Err(format!(
                "unit node {} GPU {} is not in the {}x{} cluster",
                unit.node,
                unit.index,
                self.per_node.len(),
                self.gpus_per_node
            ));
        }
        if unit.mig.is_some() {
            return Err(format!(
                "unit node {} GPU {} names MIG instance {:?} but the simulated GPUs have none",
                unit.node, unit.index, unit.mig
            ));
        }
        Ok(unit.node as usize * self.gpus_per_node as usize + unit.index as usize)
    }

    fn advance(&mut self, now_ms: u64) {
        let dt = now_ms.saturating_sub(self.last_ms);
        self.area_unit_ms += u128::from(self.busy) * u128::from(dt);
        self.last_ms = self.last_ms.max(now_ms);
    }

    /// A job took these units at `now_ms`.
    pub fn take(&mut self, units: &[GpuRef], now_ms: u64) -> Result<(), String> {
        self.advance(now_ms);
        for unit in units {
            let slot = self.slot(unit)?;
            self.holders[slot] += 1;
            self.per_node[unit.node as usize] += 1;
            self.busy += 1;
            let over_gpu = u64::from(self.holders[slot] - 1);
            let over_node =
                u64::from(self.per_node[unit.node as usize].saturating_sub(self.gpus_per_node));
            self.max_oversubscription = self.max_oversubscription.max(over_gpu).max(over_node);
        }
        Ok(())
    }

    /// A job gave these units back at `now_ms`.
    pub fn give(&mut self, units: &[GpuRef], now_ms: u64) -> Result<(), String> {
        self.advance(now_ms);
        for unit in units {
            let slot = self.slot(unit)?;
            if self.holders[slot] == 0 {
                return Err(format!(
                    "node {} GPU {} released but nobody held it",
                    unit.node, unit.index
                ));
            }
            self.holders[slot] -= 1;
            self.per_node[unit.node as usize] -= 1;
            self.busy -= 1;
        }
        Ok(())
    }

    /// Units in use now.
    pub fn busy(&self) -> u64 {
        self.busy
    }

    pub fn max_oversubscription(&self) -> u64 {
        self.max_oversubscription
    }

    /// Busy unit·ms up to `now_ms`.
    pub fn busy_unit_ms(&mut self, now_ms: u64) -> u128 {
        self.advance(now_ms);
        self.area_unit_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(node: u32, index: u32) -> GpuRef {
        GpuRef {
            node,
            index,
            mig: None,
        }
    }

    #[test]
    fn counts_oversubscription_and_area() {
        let mut l = Ledger::new(2, 2);
        l.take(&[u(0, 0), u(0, 1)], 0).unwrap();
        assert_eq!(l.max_oversubscription(), 0);
        l.take(&[u(1, 0)], 10).unwrap();
        l.give(&[u(0, 0), u(0, 1)], 20).unwrap();
        assert_eq!(l.busy(), 1);
        // 2 units × 10 ms + 3 × 10 + 1 × 5
        assert_eq!(l.busy_unit_ms(25), 55);
        l.take(&[u(1, 0)], 30).unwrap();
        assert_eq!(l.max_oversubscription(), 1);
    }

    #[test]
    fn refuses_unknown_units_and_double_release() {
        let mut l = Ledger::new(1, 2);
        assert!(l
            .take(&[u(1, 0)], 0)
            .unwrap_err()
            .contains("not in the 1x2"));
        assert!(l.take(&[u(0, 2)], 0).is_err());
        assert!(l.give(&[u(0, 0)], 0).unwrap_err().contains("nobody held"));
    }
}
