//! Every test file runs: a crate's integration tests are one binary (`tests/integration.rs`,
//! Cargo's `autotests = false`), so a file in `tests/` that neither that root declares nor a
//! `[[test]]` of the crate names would compile into nothing and pass by never running.

use std::collections::BTreeSet;
use std::path::Path;

use wirecheck_e2e::repo_root;

/// What runs of `crate_dir/tests/*.rs` (the modules `integration.rs` declares and the paths of
/// the crate's own `[[test]]` targets; every file where Cargo still discovers them), and the
/// files there.
fn declared_and_present(crate_dir: &Path) -> (BTreeSet<String>, BTreeSet<String>) {
    let tests = crate_dir.join("tests");
    let root = std::fs::read_to_string(tests.join("integration.rs")).unwrap_or_default();
    let mut declared: BTreeSet<String> = root
        .lines()
        .filter_map(|l| l.strip_prefix("mod ")?.strip_suffix(';'))
        .map(|m| format!("{m}.rs"))
        .collect();
    let manifest: toml::Value =
        toml::from_str(&std::fs::read_to_string(crate_dir.join("Cargo.toml")).unwrap()).unwrap();
    let discovered = manifest
        .get("package")
        .and_then(|p| p.get("autotests"))
        .and_then(toml::Value::as_bool)
        .unwrap_or(true);
    let present: BTreeSet<String> = std::fs::read_dir(&tests)
        .into_iter()
        .flatten()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".rs"))
        .collect();
    if discovered {
        // Cargo makes a binary of every file itself.
        return (present.clone(), present);
    }
    for target in manifest
        .get("test")
        .and_then(toml::Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(path) = target.get("path").and_then(toml::Value::as_str) {
            declared.insert(path.trim_start_matches("tests/").to_owned());
        }
    }
    (declared, present)
}

#[test]
fn every_test_file_of_every_crate_is_part_of_a_test_binary() {
    let root = repo_root();
    let mut crates = 0;
    let mut orphans = Vec::new();
    for (member, dir) in crate::workspace_members::workspace_members() {
        if !dir.join("tests").is_dir() {
            continue;
        }
        crates += 1;
        let (declared, present) = declared_and_present(&dir);
        for file in present.difference(&declared) {
            orphans.push(format!("{member}/tests/{file}"));
        }
    }
    assert!(
        crates >= 8,
        "crates with tests found under {}",
        root.display()
    );
    assert!(
        orphans.is_empty(),
        "test files no binary runs (add `mod <file>;` to the crate's tests/integration.rs): {orphans:?}"
    );
}
