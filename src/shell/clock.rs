//! The shell's one clock: the time now, the wall-clock time and a way to
//! wait. Everything else (the executor, the topology's scan loop, its
//! checks, DNS, ObjectIds) takes it as an argument, so the shell runs on
//! virtual time in tests as the pure core already does. Only this module
//! reads the system's time or sleeps (clippy's `disallowed-methods`, see
//! `clippy.toml`, keeps it so).
// The one place allowed to read the system's clocks and sleep.
#![allow(clippy::disallowed_methods)]

use std::fmt::Debug;
#[cfg(test)]
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

/// Reads the time and sleeps. The shell uses nothing else.
pub(crate) trait Clock: Send + Sync + Debug {
    /// The time now, for durations and deadlines.
    fn now(&self) -> Instant;
    /// The calendar time now (an ObjectId's seconds).
    fn wall_time(&self) -> SystemTime;
    /// Waits `duration` (never called with zero).
    fn sleep(&self, duration: Duration);
}

/// The real clock.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn wall_time(&self) -> SystemTime {
        SystemTime::now()
    }

    fn sleep(&self, duration: Duration) {
        std::thread::sleep(duration);
    }
}

/// The system's clock run ahead by a test's skew
/// ([`crate::unversioned::set_clock_skew`]); sleeps are real.
#[derive(Clone, Debug)]
pub(crate) struct SkewedClock(pub(crate) crate::unversioned::ClockSkew);

impl Clock for SkewedClock {
    fn now(&self) -> Instant {
        Instant::now() + self.0.ahead()
    }

    fn wall_time(&self) -> SystemTime {
        SystemTime::now() + self.0.ahead()
    }

    fn sleep(&self, duration: Duration) {
        std::thread::sleep(duration);
    }
}

/// Virtual time for tests: starts at the instant it is made, moves only
/// when something sleeps or the test advances it, and records the sleeps.
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct VirtualClock {
    start: Instant,
    state: Mutex<VirtualState>,
}

#[cfg(test)]
#[derive(Debug, Default)]
struct VirtualState {
    elapsed: Duration,
    sleeps: Vec<Duration>,
}

#[cfg(test)]
impl VirtualClock {
    pub(crate) fn new() -> Self {
        VirtualClock {
            start: Instant::now(),
            state: Mutex::new(VirtualState::default()),
        }
    }

    /// Moves time forward without a sleep (the time an exchange took).
    pub(crate) fn advance(&self, by: Duration) {
        self.lock().elapsed += by;
    }

    /// Every sleep so far, in order.
    pub(crate) fn sleeps(&self) -> Vec<Duration> {
        self.lock().sleeps.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VirtualState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
impl Clock for VirtualClock {
    fn now(&self) -> Instant {
        self.start + self.lock().elapsed
    }

    fn wall_time(&self) -> SystemTime {
        // A fixed calendar start (2023-11-14) keeps what tests derive from
        // it (ObjectId seconds) reproducible.
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000) + self.lock().elapsed
    }

    fn sleep(&self, duration: Duration) {
        let mut state = self.lock();
        state.elapsed += duration;
        state.sleeps.push(duration);
    }
}

impl crate::proto::sdam::ServerInfo<'_> {
    /// When the driver last updated what it knows of this server (its
    /// last check, or the error that made it Unknown), in wall-clock time;
    /// `None` for a server not checked yet. Read here, where the clock is:
    /// the description keeps a monotonic instant.
    pub fn last_update_time(&self) -> Option<bson::DateTime> {
        let made = self.last_update_instant()?;
        let age = SystemClock.now().saturating_duration_since(made);
        let wall = SystemClock.wall_time().checked_sub(age)?;
        Some(bson::DateTime::from_system_time(wall))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_servers_last_update_time_is_when_its_description_was_made() {
        use crate::proto::sdam::{ServerDescription, ServerInfo};
        let mut description = ServerDescription::unknown("a:1".parse().unwrap());
        assert_eq!(ServerInfo::new(&description).last_update_time(), None);
        description.last_update_time = Some(Instant::now() - Duration::from_secs(30));
        let reported = ServerInfo::new(&description).last_update_time().unwrap();
        let expected = bson::DateTime::now().timestamp_millis() - 30_000;
        assert!(
            (reported.timestamp_millis() - expected).abs() < 2_000,
            "{reported}"
        );
    }

    #[test]
    fn virtual_time_moves_only_when_slept_or_advanced() {
        let clock = VirtualClock::new();
        let t0 = clock.now();
        assert_eq!(clock.now(), t0);
        clock.sleep(Duration::from_millis(30));
        clock.advance(Duration::from_millis(5));
        assert_eq!(clock.now() - t0, Duration::from_millis(35));
        assert_eq!(clock.sleeps(), vec![Duration::from_millis(30)]);
        let wall = clock.wall_time().duration_since(SystemTime::UNIX_EPOCH);
        assert_eq!(wall.unwrap(), Duration::from_millis(1_700_000_000_035));
    }
}
