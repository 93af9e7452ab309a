//! Runs the max-staleness spec tests: every file under
//! `max-staleness/tests/<TopologyType>/`.

use super::files as spec;
use super::selection_fixture;

#[test]
fn max_staleness() {
    let Some(root) = spec::dir("max-staleness/tests") else {
        return;
    };
    let mut report = spec::Report::new("max-staleness");
    let mut dirs: Vec<_> = std::fs::read_dir(&root)
        .expect("list max-staleness/tests")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for dir in dirs {
        let topology_type = spec::name(&dir);
        for path in spec::json_files(&dir) {
            let file = format!("{topology_type}/{}", spec::name(&path));
            let test = spec::load(&path);
            report.run(&file, "selection", || selection_fixture::run_case(&test));
        }
    }
    report.finish();
}
