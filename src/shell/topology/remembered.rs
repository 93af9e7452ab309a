//! The state file's remembered topology (issue 41): it orders a new
//! process's first scan, and each scan's result is written back when it
//! differs or the entry is half a heartbeat old
//! ([`crate::proto::state_file::RememberedTopology`] has the rules).

use std::time::Instant;

use super::Topology;

impl Topology {
    /// Before a selection: until a scan has ended, the state file's
    /// remembered topology (when fresh) orders the first scan's ties.
    /// Returns when the last scan ended, for [`Topology::remember_topology`].
    pub(super) fn order_first_scan(&mut self) -> Option<Instant> {
        let last_scan_end = self.monitor.last_scan_end();
        if let (Some(file), None) = (&self.state_file, last_scan_end) {
            let order =
                file.first_scan_order(self.wall_millis(), self.options.heartbeat_frequency());
            if !order.is_empty() {
                self.monitor.prefer_in_first_scan(order);
            }
        }
        last_scan_end
    }

    /// After a selection: when a scan ended during it (the last scan no
    /// longer ended at `last_scan_end`), what it found goes to the state
    /// file, if that is worth a write.
    pub(super) fn remember_topology(&self, last_scan_end: Option<Instant>) {
        let Some(file) = &self.state_file else {
            return;
        };
        if self.monitor.last_scan_end() == last_scan_end {
            return;
        }
        file.save_topology(
            self.monitor.description(),
            self.options.heartbeat_frequency(),
            self.wall_millis(),
        );
    }
}
