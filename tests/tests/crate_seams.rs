//! The workspace's crate seams, read from `cargo metadata`: the oracle rule (ARCHITECTURE.md,
//! "The rule") holds in the dependency graph, not only in comments. A `use reporter::...` slipped
//! into the oracle, the fake or the runner, or the reverse, fails here; so does a results crate
//! that reaches for the runner or the command line, or a runner that draws or parses flags.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;
use wirecheck_e2e::repo_root;

/// Package name → the names of its normal and build dependencies (not dev: a test may run the
/// reporter as a process), every feature on, so an optional or build-time edge counts too.
struct Graph {
    direct: BTreeMap<String, BTreeSet<String>>,
}

impl Graph {
    fn load() -> Graph {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let out = Command::new(cargo)
            .args([
                "metadata",
                "--format-version",
                "1",
                "--offline",
                "--all-features",
            ])
            .current_dir(repo_root())
            .output()
            .expect("cargo metadata runs");
        assert!(
            out.status.success(),
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let meta: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata is JSON");
        let name_of: BTreeMap<&str, &str> = meta["packages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
            .collect();
        let mut direct = BTreeMap::new();
        for node in meta["resolve"]["nodes"].as_array().unwrap() {
            let name = name_of[node["id"].as_str().unwrap()].to_owned();
            let deps: BTreeSet<String> = node["deps"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| {
                    d["dep_kinds"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|k| k["kind"].is_null() || k["kind"] == "build")
                })
                .map(|d| name_of[d["pkg"].as_str().unwrap()].to_owned())
                .collect();
            direct
                .entry(name)
                .or_insert_with(BTreeSet::new)
                .extend(deps);
        }
        Graph { direct }
    }

    /// Everything `package` depends on, transitively (normal and build dependencies).
    fn closure(&self, package: &str) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![package.to_owned()];
        while let Some(p) = todo.pop() {
            for d in self.direct.get(&p).into_iter().flatten() {
                if seen.insert(d.clone()) {
                    todo.push(d.clone());
                }
            }
        }
        seen
    }
}

#[test]
fn the_judge_and_the_reporter_never_depend_on_each_other() {
    let graph = Graph::load();
    let judges = [
        "wirecheck-oracle",
        "fake-wireserver",
        "fake-wireserver-cli",
        "wirecheck-results",
        "conformance",
        "wirecheck",
    ];
    for judge in judges {
        assert!(
            graph.direct.contains_key(judge),
            "{judge} is not a workspace package any more: update this test"
        );
        let deps = graph.closure(judge);
        assert!(
            !deps.contains("reporter"),
            "{judge} depends on reporter (through {:?})",
            deps
        );
    }
    let reporter = graph.closure("reporter");
    for judge in judges {
        assert!(!reporter.contains(judge), "reporter depends on {judge}");
    }
}

#[test]
fn the_oracle_stands_alone() {
    let graph = Graph::load();
    let oracle = graph.closure("wirecheck-oracle");
    for workspace in [
        "fake-wireserver",
        "wirecheck-results",
        "conformance",
        "wirecheck",
        "reporter",
    ] {
        assert!(
            !oracle.contains(workspace),
            "the oracle depends on {workspace}"
        );
    }
    // Pure parsers: no runtime, no HTTP stack.
    for heavy in ["tokio", "axum", "hyper", "reqwest"] {
        assert!(!oracle.contains(heavy), "the oracle depends on {heavy}");
    }
    assert!(
        graph.direct["fake-wireserver"].contains("wirecheck-oracle"),
        "the fake's journal carries the oracle's verdicts: it depends on wirecheck-oracle"
    );
}

/// The results model is a contract read back across versions (`wirecheck merge`): it depends on
/// neither the runner nor the command line. The runner (`conformance`) reports progress as
/// events and parses no flags: the command line (`wirecheck`), clap and indicatif are not its.
#[test]
fn results_runner_and_command_line_are_layered() {
    let graph = Graph::load();
    for crate_ in ["wirecheck-results", "conformance", "wirecheck"] {
        assert!(
            graph.direct.contains_key(crate_),
            "{crate_} is not a workspace package any more: update this test"
        );
    }
    let results = graph.closure("wirecheck-results");
    for above in [
        "conformance",
        "wirecheck",
        "fake-wireserver-cli",
        "clap",
        "indicatif",
    ] {
        assert!(
            !results.contains(above),
            "the results crate depends on {above}"
        );
    }
    let runner = graph.closure("conformance");
    for above in ["wirecheck", "fake-wireserver-cli", "clap", "indicatif"] {
        assert!(!runner.contains(above), "the runner depends on {above}");
    }
    assert!(runner.contains("wirecheck-results"));
    // The command line is the one that has them (the test would pass vacuously otherwise).
    let cli = graph.closure("wirecheck");
    for below in ["conformance", "wirecheck-results", "clap", "indicatif"] {
        assert!(cli.contains(below), "the command line lost {below}");
    }
}

/// A test that uses the fake as a library builds none of the binary's dependencies: the binary
/// is the `fake-wireserver-cli` crate's.
#[test]
fn the_fakes_library_leaves_the_binarys_dependencies_out() {
    let graph = Graph::load();
    let binary_only = ["anyhow", "clap", "mimalloc", "tracing-subscriber"];
    let library = graph.closure("fake-wireserver");
    for dep in binary_only {
        assert!(!library.contains(dep), "the fake's library pulls in {dep}");
    }
    assert!(library.contains("wirecheck-oracle") && library.contains("tokio"));
    assert!(
        !library.contains("fake-wireserver-cli"),
        "the fake's library depends on its binary's crate"
    );
    // The binary still has them (the test would pass vacuously if the names were wrong).
    let binary = graph.closure("fake-wireserver-cli");
    for dep in binary_only {
        assert!(binary.contains(dep), "the fake's binary lost {dep}");
    }
    assert!(binary.contains("fake-wireserver"));
}
