//! Round-trip time of server checks: the smoothed average the server
//! selection spec asks for, and the minimum over recent samples the server
//! monitoring spec asks for.
//!
//! ```text
//!   sample ──> add_sample ──> average = 0.2·sample + 0.8·average  (first sample as is)
//!                        └──> last 10 samples ──> minimum (needs 2 samples)
//!   server becomes Unknown ──> reset (both forgotten)
//! ```

use std::collections::VecDeque;
use std::time::Duration;

/// Weight of a new sample in the moving average (server selection spec).
pub const RTT_ALPHA: f64 = 0.2;

/// How many recent samples the minimum round-trip time is taken over
/// (server monitoring spec).
pub const MIN_RTT_WINDOW: usize = 10;

/// The round-trip-time statistics of one server's checks.
///
/// A plain value: the caller measures each check and feeds the duration in.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RoundTripTime {
    average: Option<Duration>,
    recent: VecDeque<Duration>,
}

impl RoundTripTime {
    /// A tracker with no samples.
    pub fn new() -> Self {
        Self::default()
    }

    /// A tracker whose average is already `average` (and that has no recent
    /// samples), as a server description carries it between checks.
    #[cfg(test)]
    pub fn with_average(average: Duration) -> Self {
        RoundTripTime {
            average: Some(average),
            recent: VecDeque::new(),
        }
    }

    /// Records one check's duration.
    pub fn add_sample(&mut self, sample: Duration) {
        self.average = Some(match self.average {
            None => sample,
            Some(old) => {
                // Computed in nanoseconds as floats: `Duration` arithmetic
                // would truncate at each step and drift over many checks.
                let nanos = RTT_ALPHA * sample.as_nanos() as f64
                    + (1.0 - RTT_ALPHA) * old.as_nanos() as f64;
                Duration::from_nanos(nanos.round() as u64)
            }
        });
        if self.recent.len() == MIN_RTT_WINDOW {
            self.recent.pop_front();
        }
        self.recent.push_back(sample);
    }

    /// The exponentially weighted moving average, `None` before the first
    /// sample.
    pub fn average(&self) -> Option<Duration> {
        self.average
    }

    /// The smallest of the last [`MIN_RTT_WINDOW`] samples. Zero until two
    /// samples exist, as the spec says: one sample (often the connection
    /// handshake) is not enough to trust as a floor.
    pub fn min(&self) -> Duration {
        if self.recent.len() < 2 {
            return Duration::ZERO;
        }
        self.recent.iter().copied().min().unwrap_or(Duration::ZERO)
    }

    /// Forgets everything: the server became Unknown, so the next successful
    /// check starts the average from scratch.
    pub fn reset(&mut self) {
        self.average = None;
        self.recent.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn first_sample_is_taken_as_is_then_smoothed() {
        let mut rtt = RoundTripTime::new();
        assert_eq!(rtt.average(), None);
        rtt.add_sample(ms(10));
        assert_eq!(rtt.average(), Some(ms(10)));
        rtt.add_sample(ms(20));
        assert_eq!(rtt.average(), Some(ms(12)));
    }

    #[test]
    fn reset_forgets_average_and_minimum() {
        let mut rtt = RoundTripTime::new();
        rtt.add_sample(ms(10));
        rtt.add_sample(ms(30));
        assert_eq!(rtt.min(), ms(10));
        rtt.reset();
        assert_eq!(rtt.average(), None);
        assert_eq!(rtt.min(), Duration::ZERO);
        rtt.add_sample(ms(50));
        assert_eq!(rtt.average(), Some(ms(50)));
    }

    #[test]
    fn minimum_needs_two_samples_and_covers_only_the_window() {
        let mut rtt = RoundTripTime::new();
        rtt.add_sample(ms(1));
        assert_eq!(rtt.min(), Duration::ZERO);
        for _ in 0..MIN_RTT_WINDOW - 1 {
            rtt.add_sample(ms(7));
        }
        assert_eq!(rtt.min(), ms(1));
        // The 1 ms sample falls out of the window.
        rtt.add_sample(ms(9));
        assert_eq!(rtt.min(), ms(7));
    }
}
