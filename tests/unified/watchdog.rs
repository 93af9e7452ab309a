//! The runner's guard against a stalled run.
//!
//! Each test runs under a time limit of its own, but the work between
//! tests (starting a lane's servers, checking requirements) does not, and
//! a hung test can leave the lane's servers holding fail points or
//! sessions that stall every test after it. CI then stalls for hours with
//! nothing in its log. So each lane says what it is doing; a monitor prints
//! where every lane is once a minute and stops the process, naming the
//! stalled step, when a lane stays on one step too long.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a lane may stay on one test (its own limit plus the setup
/// around it, on a loaded two-core machine) before the run is stalled.
const STALL_LIMIT: Duration = Duration::from_secs(120);

/// How long a lane may take to start its servers and simulators.
const START_LIMIT: Duration = Duration::from_secs(300);

/// How often the monitor prints where the lanes are.
const HEARTBEAT: Duration = Duration::from_secs(60);

/// What a lane is doing.
#[derive(Clone)]
struct Step {
    what: String,
    since: Instant,
    limit: Duration,
    files_done: usize,
    files: usize,
}

/// Per lane: the step under way, or `None` once the lane has finished.
static LANES: Mutex<Vec<Option<Step>>> = Mutex::new(Vec::new());

fn lanes() -> std::sync::MutexGuard<'static, Vec<Option<Step>>> {
    // A lane that panicked while holding the lock left consistent data:
    // every write is one assignment.
    LANES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Starts the monitor for `count` lanes of `files` files each; it ends
/// when every lane has called [`finished`].
pub fn start(files_per_lane: &[usize]) {
    *lanes() = files_per_lane
        .iter()
        .map(|&files| {
            Some(Step {
                what: "starting its servers".to_string(),
                since: Instant::now(),
                limit: START_LIMIT,
                files_done: 0,
                files,
            })
        })
        .collect();
    std::thread::spawn(monitor);
}

/// Lane `lane` is now running `what` (a file and test name).
pub fn running(lane: usize, files_done: usize, what: &str) {
    if let Some(Some(step)) = lanes().get_mut(lane) {
        step.what = what.to_string();
        step.since = Instant::now();
        step.limit = STALL_LIMIT;
        step.files_done = files_done;
    }
}

/// Lane `lane` has run all its files.
pub fn finished(lane: usize) {
    if let Some(slot) = lanes().get_mut(lane) {
        *slot = None;
    }
}

fn monitor() {
    let mut last_heartbeat = Instant::now();
    loop {
        std::thread::sleep(Duration::from_secs(2));
        let snapshot = lanes().clone();
        if snapshot.iter().all(Option::is_none) {
            return;
        }
        let stalled = snapshot.iter().enumerate().find_map(|(i, s)| {
            s.as_ref()
                .filter(|s| s.since.elapsed() > s.limit)
                .map(|s| (i, s))
        });
        if let Some((lane, step)) = stalled {
            eprintln!(
                "[unified] STALLED: lane {lane} has been {} for {:?} (limit {:?}); stopping the run",
                step.what,
                step.since.elapsed(),
                step.limit
            );
            print_lanes(&snapshot);
            // The stalled thread cannot be interrupted; ending the process
            // turns a silent hang into a failure that names it.
            std::process::exit(3);
        }
        if last_heartbeat.elapsed() >= HEARTBEAT {
            last_heartbeat = Instant::now();
            print_lanes(&snapshot);
        }
    }
}

fn print_lanes(snapshot: &[Option<Step>]) {
    for (lane, step) in snapshot.iter().enumerate() {
        match step {
            Some(s) => eprintln!(
                "[unified] lane {lane}: {}/{} files, {:?} on {}",
                s.files_done,
                s.files,
                s.since.elapsed(),
                s.what
            ),
            None => eprintln!("[unified] lane {lane}: done"),
        }
    }
}
