//! Permissions, missing and torn files, and atomic writes, on real files in
//! a scratch directory of this test's own.

use std::os::unix::fs::PermissionsExt as _;

use super::*;
use crate::proto::auth::scram::{SaltParams, ScramKeys, ScramMechanism};

/// A fresh directory (mode 0700) removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("mongo-inline-state-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        Scratch(dir)
    }

    fn file(&self) -> PathBuf {
        self.0.join("state")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn entry() -> SealedScramKeys {
    let params = SaltParams {
        salt: vec![5; 16],
        iterations: 4096,
    };
    let keys = ScramKeys::from_parts(vec![1; 32], vec![2; 32]);
    SealedScramKeys::seal(
        &keys,
        ScramMechanism::Sha256,
        params,
        b"pw",
        Binding([1; 32]),
        [3; 16],
    )
}

#[test]
fn a_missing_file_is_empty_and_the_first_write_creates_it_0600() {
    let scratch = Scratch::new("create");
    let (file, contents) = StateFile::open(&scratch.file()).unwrap();
    assert!(contents.entries.is_empty());
    file.save(Binding([1; 32]), &[entry()], 10);
    let mode = std::fs::metadata(scratch.file())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let (_, contents) = StateFile::open(&scratch.file()).unwrap();
    assert_eq!(contents.scram_keys(Binding([1; 32])), vec![entry()]);
    let leftovers = std::fs::read_dir(&scratch.0).unwrap().count();
    assert_eq!(leftovers, 1, "no temporary file is left behind");
}

#[test]
fn a_torn_file_reads_as_empty_and_is_rewritten() {
    let scratch = Scratch::new("torn");
    let (file, _) = StateFile::open(&scratch.file()).unwrap();
    file.save(Binding([1; 32]), &[entry()], 10);
    let bytes = std::fs::read(scratch.file()).unwrap();
    std::fs::write(scratch.file(), &bytes[..bytes.len() / 2]).unwrap();
    let (file, contents) = StateFile::open(&scratch.file()).unwrap();
    assert!(contents.entries.is_empty());
    file.save(Binding([2; 32]), &[entry()], 11);
    let (_, contents) = StateFile::open(&scratch.file()).unwrap();
    assert_eq!(contents.entries.len(), 1);
}

#[test]
fn a_save_keeps_other_clients_entries() {
    let scratch = Scratch::new("merge");
    let (first, _) = StateFile::open(&scratch.file()).unwrap();
    let (second, _) = StateFile::open(&scratch.file()).unwrap();
    first.save(Binding([1; 32]), &[entry()], 10);
    second.save(Binding([2; 32]), &[entry()], 11);
    let (_, contents) = StateFile::open(&scratch.file()).unwrap();
    assert_eq!(contents.entries.len(), 2);
    second.save(Binding([2; 32]), &[], 12);
    let (_, contents) = StateFile::open(&scratch.file()).unwrap();
    assert_eq!(contents.scram_keys(Binding([1; 32])).len(), 1);
    assert!(contents.scram_keys(Binding([2; 32])).is_empty());
}

#[test]
fn a_file_others_can_read_or_write_is_refused_by_name() {
    let scratch = Scratch::new("file-mode");
    let (file, _) = StateFile::open(&scratch.file()).unwrap();
    file.save(Binding([1; 32]), &[entry()], 10);
    for mode in [0o644, 0o640, 0o602, 0o660] {
        std::fs::set_permissions(scratch.file(), std::fs::Permissions::from_mode(mode)).unwrap();
        let error = StateFile::open(&scratch.file()).unwrap_err().to_string();
        assert!(
            error.contains("state file") && error.contains("must be 0600"),
            "{error}"
        );
        assert!(error.contains(&format!("{mode:o}")), "{error}");
    }
}

#[test]
fn a_directory_others_can_write_is_refused_by_name() {
    let scratch = Scratch::new("dir-mode");
    for mode in [0o770, 0o777, 0o722] {
        std::fs::set_permissions(&scratch.0, std::fs::Permissions::from_mode(mode)).unwrap();
        let error = StateFile::open(&scratch.file()).unwrap_err().to_string();
        assert!(error.contains("writable by its group or others"), "{error}");
    }
    std::fs::set_permissions(&scratch.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    StateFile::open(&scratch.file()).expect("0755 is this user's alone to write");
}

#[test]
fn a_directory_or_file_of_another_user_or_a_missing_directory_is_refused() {
    let me = current_uid(Path::new("/")).unwrap();
    if me == 0 {
        // Root can give them away to test it; anyone else finds `/` is not theirs.
        let scratch = Scratch::new("owner");
        let (file, _) = StateFile::open(&scratch.file()).unwrap();
        file.save(Binding([1; 32]), &[entry()], 10);
        std::os::unix::fs::chown(scratch.file(), Some(65534), None).unwrap();
        let error = StateFile::open(&scratch.file()).unwrap_err().to_string();
        assert!(
            error.contains("it belongs to another user (uid 65534)"),
            "{error}"
        );
        std::os::unix::fs::chown(&scratch.0, Some(65534), None).unwrap();
        let error = StateFile::open(&scratch.file()).unwrap_err().to_string();
        assert!(
            error.contains("directory") && error.contains("another user"),
            "{error}"
        );
    } else {
        let error = StateFile::open(Path::new("/state"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("belongs to another user"), "{error}");
    }
    let error = StateFile::open(Path::new("/nonexistent-dir-41/state"))
        .unwrap_err()
        .to_string();
    assert!(error.contains("cannot be read"), "{error}");
}

#[test]
fn a_directory_in_place_of_the_file_is_refused() {
    let scratch = Scratch::new("not-file");
    std::fs::create_dir(scratch.file()).unwrap();
    let error = StateFile::open(&scratch.file()).unwrap_err().to_string();
    assert!(error.contains("not a regular file"), "{error}");
}
