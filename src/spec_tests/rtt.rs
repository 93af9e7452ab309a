//! The server selection spec's round-trip-time tests
//! (`server-selection/tests/rtt`): one sample added to a tracker whose
//! average is `avg_rtt_ms` ("NULL": no sample yet) must give `new_avg_rtt`.

use std::time::Duration;

use bson::Bson;
use serde::Deserialize;

use super::files::{self as spec, Report};
use crate::proto::sdam::RoundTripTime;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RttTest {
    avg_rtt_ms: Bson,
    new_rtt_ms: f64,
    new_avg_rtt: f64,
}

fn millis(ms: f64) -> Duration {
    Duration::from_secs_f64(ms / 1000.0)
}

fn run(test: &RttTest) -> Result<(), String> {
    let mut rtt = match &test.avg_rtt_ms {
        Bson::String(s) if s == "NULL" => RoundTripTime::new(),
        Bson::Int32(n) => RoundTripTime::with_average(millis(f64::from(*n))),
        Bson::Int64(n) => RoundTripTime::with_average(millis(*n as f64)),
        Bson::Double(f) => RoundTripTime::with_average(millis(*f)),
        other => return Err(format!("unexpected avg_rtt_ms {other}")),
    };
    rtt.add_sample(millis(test.new_rtt_ms));
    let average = rtt
        .average()
        .ok_or_else(|| "no average after a sample".to_string())?;
    let got_ms = average.as_secs_f64() * 1000.0;
    // Durations are whole nanoseconds; the fixtures are decimal milliseconds.
    if (got_ms - test.new_avg_rtt).abs() > 1e-5 {
        return Err(format!(
            "expected average {} ms, got {got_ms} ms",
            test.new_avg_rtt
        ));
    }
    Ok(())
}

#[test]
fn rtt() {
    let Some(dir) = spec::dir("server-selection/tests/rtt") else {
        return;
    };
    let mut report = Report::new("server-selection/rtt");
    for path in spec::json_files(&dir) {
        let file = spec::name(&path);
        let test: RttTest = spec::load_as(&path);
        report.run(&file, &file, || run(&test));
    }
    report.finish();
}
