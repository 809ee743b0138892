//! `wirecheck merge OUT PART...`: the parts of one run split with `--partition K/N` (one CI
//! job each) put back together into one [`RunResults`], which the usual writers turn into
//! results.json, junit.xml and report.html; each part's `artifacts/` is copied beside them.
//!
//! A part says which run it belongs to ([`RunInfo`]: the plan's fingerprint, its case count,
//! the partition, an optional `--run-id`), so parts of different runs, versions or
//! partitionings, a part given twice and a missing part are refused, naming the part.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use crate::json;
use crate::model::{AgentResults, CaseResult, NeverStartedAgent, PartInfo, RunInfo, RunResults};
use crate::output::ResultsError;

/// The case id suffix of snapshot cases, which `plan_cases` does not count (they exist only
/// for pairs that ran).
const SNAPSHOT_SUFFIX: &str = ".snapshot.transcript";

/// Largest results.json of a part read: 512 MiB (the four-agent run's is a few MiB).
pub const MAX_PART_BYTES: u64 = json::MAX_READ_BYTES;

/// FNV-1a, 64 bits: a fingerprint that is the same in every build (std's hasher is not
/// promised to be), for telling plans apart, not for security.
fn fnv1a(bytes: &[u8], mut hash: u64) -> u64 {
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// The fingerprint of a whole plan: the wirecheck version, whether snapshots are compared,
/// every (agent, case id) pair in plan order, every partition included, and `content`: what
/// each agent profile and scenario says (so two agents of one name, or a scenario edited
/// between parts, are not one run).
pub fn plan_fingerprint<'a>(
    wirecheck_version: &str,
    snapshots: bool,
    cases: impl IntoIterator<Item = (&'a str, String)>,
    content: impl IntoIterator<Item = String>,
) -> String {
    let mut hash = 0xcbf2_9ce4_8422_2325;
    hash = fnv1a(format!("wirecheck {wirecheck_version}\n").as_bytes(), hash);
    hash = fnv1a(format!("snapshots {snapshots}\n").as_bytes(), hash);
    for (agent, case) in cases {
        hash = fnv1a(format!("{agent}\t{case}\n").as_bytes(), hash);
    }
    for item in content {
        hash = fnv1a(item.as_bytes(), hash);
        hash = fnv1a(b"\n", hash);
    }
    format!("{hash:016x}")
}

/// Why parts cannot be merged. Each names the part (its path as given).
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("give at least one part (a results folder or its results.json)")]
    NoParts,
    #[error("{0}")]
    Read(ResultsError),
    #[error("{path}: cannot read this part: {message}")]
    ReadPart { path: PathBuf, message: String },
    #[error(
        "{part}: says nothing about its run (no \"run\" in results.json): it was written by a wirecheck older than `wirecheck merge`; run it again with this one"
    )]
    NoRunInfo { part: String },
    #[error(
        "{part}: written by wirecheck {found}, {first} by wirecheck {expected}: the parts of one run come from one wirecheck"
    )]
    Version {
        part: String,
        first: String,
        found: String,
        expected: String,
    },
    #[error(
        "{part}: part of another run than {first} (plan {found}, not {expected}: other agents, cases or --snapshots)"
    )]
    Plan {
        part: String,
        first: String,
        found: String,
        expected: String,
    },
    #[error("{part}: run id {found}, {first} has run id {expected}: parts of different runs")]
    RunId {
        part: String,
        first: String,
        found: String,
        expected: String,
    },
    #[error(
        "{part}: {found}, {first} is {expected}: the parts of one run are split the same way (--partition K/N with one N)"
    )]
    Partitioning {
        part: String,
        first: String,
        found: String,
        expected: String,
    },
    #[error("{part}: partition {k}/{n} is not a partition (expected 1 ≤ K ≤ N)")]
    BadPartition { part: String, k: usize, n: usize },
    #[error("{part} and {other} are both partition {k}/{n}")]
    Overlap {
        part: String,
        other: String,
        k: usize,
        n: usize,
    },
    #[error("partition {missing} of {n} is missing (given: {given})")]
    Missing {
        missing: String,
        n: usize,
        given: String,
    },
    #[error("{part}: case {case} of agent {agent} is also in {other}")]
    DuplicateCase {
        part: String,
        other: String,
        agent: String,
        case: String,
    },
    #[error(
        "the parts hold {found} cases, their run planned {expected}: a part lost or gained cases ({parts})"
    )]
    CaseCount {
        found: usize,
        expected: usize,
        parts: String,
    },
    #[error("{part}: is also the output folder; merge into a folder of its own")]
    OutIsPart { part: String },
    #[error("{path}: {message}")]
    Artifacts { path: PathBuf, message: String },
}

/// One part as read: where it came from and what it holds.
#[derive(Debug, Clone)]
pub struct Part {
    /// As the user gave it (named in errors).
    pub name: String,
    /// The results folder (its `artifacts/` is copied).
    pub dir: PathBuf,
    pub results: RunResults,
}

/// Reads a part: a results folder or its results.json.
pub fn read_part(path: &Path) -> Result<Part, MergeError> {
    let (dir, file) = if path.is_dir() {
        (path.to_path_buf(), path.join(json::FILE_NAME))
    } else {
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        (dir, path.to_path_buf())
    };
    // A regular file, read without blocking and within a bound: parts come from CI artifacts.
    let text = fake_wireserver::files::read_regular_text(&file, MAX_PART_BYTES).map_err(|e| {
        MergeError::ReadPart {
            path: file.clone(),
            message: e.to_string(),
        }
    })?;
    let results = json::from_str(&text, &file).map_err(MergeError::Read)?;
    Ok(Part {
        name: path.display().to_string(),
        dir,
        results,
    })
}

fn run_info(part: &Part) -> Result<&RunInfo, MergeError> {
    part.results
        .run
        .as_ref()
        .ok_or_else(|| MergeError::NoRunInfo {
            part: part.name.clone(),
        })
}

fn describe(p: PartInfo) -> String {
    if p.n == 1 {
        "a whole run (no --partition)".into()
    } else {
        format!("partition {}/{}", p.k, p.n)
    }
}

/// The scenario id of a case id: check ids are two dotted parts (`protocol.request`,
/// `snapshot.transcript`), scenario ids the rest.
fn scenario_id(case_id: &str) -> &str {
    crate::case_id::split_case_id(case_id).0
}

/// Merges the parts of one run; `Err` names the part that does not fit.
pub fn merge(parts: &[Part]) -> Result<RunResults, MergeError> {
    let first = parts.first().ok_or(MergeError::NoParts)?;
    let info = run_info(first)?;
    check_one_run(parts, first, info)?;
    let by_k = by_partition(parts, info.partition.n)?;
    let agents = merged_agents(&by_k, info)?;

    let mut merged = RunResults::new(
        first.results.started.clone(),
        first.results.wirecheck_version.clone(),
    );
    merged.wirecheck_commit = first.results.wirecheck_commit.clone();
    set_time_span(&mut merged, parts);
    merged.interrupted = parts.iter().find_map(|p| p.results.interrupted.clone());
    merged.uncontained = parts.iter().find_map(|p| p.results.uncontained.clone());
    merged.never_started = never_started(parts);
    // Counted on the whole plan, so every part of one run has the same.
    merged.unclaimed_flows = parts
        .first()
        .map(|p| p.results.unclaimed_flows.clone())
        .unwrap_or_default();
    merged.run = Some(RunInfo {
        partition: PartInfo { k: 1, n: 1 },
        ..info.clone()
    });
    merged.agents = agents;
    Ok(merged)
}

/// Every part is of the run `first` belongs to (`info`): one wirecheck, run id, plan and
/// partitioning, and a partition that is one.
fn check_one_run(parts: &[Part], first: &Part, info: &RunInfo) -> Result<(), MergeError> {
    let shown = |o: &Option<String>| {
        o.as_deref()
            .map_or("(none)".to_owned(), |s| format!("{s:?}"))
    };
    for part in parts {
        let theirs = run_info(part)?;
        let PartInfo { k, n } = theirs.partition;
        if k == 0 || k > n {
            return Err(MergeError::BadPartition {
                part: part.name.clone(),
                k,
                n,
            });
        }
        let mismatch = |found: String, expected: String| {
            (part.name.clone(), first.name.clone(), found, expected)
        };
        if part.results.build() != first.results.build() {
            let (part, first, found, expected) =
                mismatch(part.results.build(), first.results.build());
            return Err(MergeError::Version {
                part,
                first,
                found,
                expected,
            });
        }
        if theirs.id != info.id {
            let (part, first, found, expected) = mismatch(shown(&theirs.id), shown(&info.id));
            return Err(MergeError::RunId {
                part,
                first,
                found,
                expected,
            });
        }
        if theirs.plan != info.plan || theirs.plan_cases != info.plan_cases {
            let (part, first, found, expected) = mismatch(theirs.plan.clone(), info.plan.clone());
            return Err(MergeError::Plan {
                part,
                first,
                found,
                expected,
            });
        }
        if theirs.partition.n != info.partition.n {
            let (part, first, found, expected) =
                mismatch(describe(theirs.partition), describe(info.partition));
            return Err(MergeError::Partitioning {
                part,
                first,
                found,
                expected,
            });
        }
    }
    Ok(())
}

/// The parts by partition: each of the `n` once, none missing (a whole run: it alone).
fn by_partition(parts: &[Part], n: usize) -> Result<BTreeMap<usize, &Part>, MergeError> {
    let mut by_k: BTreeMap<usize, &Part> = BTreeMap::new();
    for part in parts {
        let k = run_info(part)?.partition.k;
        if let Some(other) = by_k.insert(k, part) {
            return Err(MergeError::Overlap {
                part: part.name.clone(),
                other: other.name.clone(),
                k,
                n,
            });
        }
    }
    let missing: Vec<String> = (1..=n)
        .filter(|k| !by_k.contains_key(k))
        .map(|k| format!("{k}/{n}"))
        .collect();
    if !missing.is_empty() {
        return Err(MergeError::Missing {
            missing: missing.join(", "),
            n,
            given: by_k
                .iter()
                .map(|(k, p)| format!("{k}/{n} {}", p.name))
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    Ok(by_k)
}

/// The agents of all parts, each case once, and as many cases as the run (`info`) planned.
fn merged_agents(
    by_k: &BTreeMap<usize, &Part>,
    info: &RunInfo,
) -> Result<Vec<AgentResults>, MergeError> {
    let n = info.partition.n;
    // Agents in the order they first appear; cases of an agent in plan order (scenarios by
    // id, a scenario's checks in its own order), as an unpartitioned run writes them.
    let mut agents: Vec<AgentResults> = Vec::new();
    let mut seen: HashMap<(String, String), &str> = HashMap::new();
    for part in by_k.values() {
        for agent in &part.results.agents {
            for case in &agent.cases {
                if let Some(other) =
                    seen.insert((agent.agent.clone(), case.id.clone()), part.name.as_str())
                {
                    return Err(MergeError::DuplicateCase {
                        part: part.name.clone(),
                        other: other.to_owned(),
                        agent: agent.agent.clone(),
                        case: case.id.clone(),
                    });
                }
            }
            match agents.iter_mut().find(|a| a.agent == agent.agent) {
                Some(a) => a.cases.extend(agent.cases.iter().cloned()),
                None => agents.push(agent.clone()),
            }
        }
    }
    for agent in &mut agents {
        agent
            .cases
            .sort_by(|a: &CaseResult, b: &CaseResult| scenario_id(&a.id).cmp(scenario_id(&b.id)));
    }
    let found = agents
        .iter()
        .flat_map(|a| &a.cases)
        .filter(|c| !c.id.ends_with(SNAPSHOT_SUFFIX))
        .count();
    if found != info.plan_cases {
        return Err(MergeError::CaseCount {
            found,
            expected: info.plan_cases,
            parts: by_k
                .iter()
                .map(|(k, p)| {
                    let cases: usize = p.results.agents.iter().map(|a| a.cases.len()).sum();
                    format!("{k}/{n} {}: {cases}", p.name)
                })
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    Ok(agents)
}

/// From the first part's start to the last part's end (the parts ran side by side).
fn set_time_span(merged: &mut RunResults, parts: &[Part]) {
    // Checked: a part's duration is its own text, and an absurd one must not panic.
    let span = |r: &RunResults| {
        let start = chrono::DateTime::parse_from_rfc3339(&r.started).ok()?;
        let took = chrono::TimeDelta::try_milliseconds(i64::try_from(r.duration_ms).ok()?)?;
        Some((start, start.checked_add_signed(took)?))
    };
    let spans: Vec<_> = parts.iter().filter_map(|p| span(&p.results)).collect();
    if spans.len() == parts.len() {
        let start = spans.iter().map(|s| s.0).min().unwrap_or(spans[0].0);
        let end = spans.iter().map(|s| s.1).max().unwrap_or(spans[0].1);
        merged.started = start
            .with_timezone(&chrono::Utc)
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        merged.duration_ms = (end - start).num_milliseconds().max(0) as u64;
    } else {
        merged.duration_ms = parts
            .iter()
            .map(|p| p.results.duration_ms)
            .max()
            .unwrap_or(0);
    }
}

/// The agents that never got going in the whole run: in every part that ran them, if any.
fn never_started(parts: &[Part]) -> Vec<NeverStartedAgent> {
    let mut never: Vec<NeverStartedAgent> = Vec::new();
    for n in parts.iter().flat_map(|p| &p.results.never_started) {
        let ran_it = |p: &&Part| {
            p.results
                .agents
                .iter()
                .any(|a| a.agent == n.agent && !a.cases.is_empty())
        };
        let everywhere = parts
            .iter()
            .filter(ran_it)
            .all(|p| p.results.never_started.iter().any(|m| m.agent == n.agent));
        if everywhere && !never.iter().any(|m| m.agent == n.agent) {
            never.push(n.clone());
        }
    }
    never
}

/// Refuses an output folder that is one of the parts (its files would be overwritten while
/// read).
pub fn check_out(out: &Path, parts: &[Part]) -> Result<(), MergeError> {
    let Ok(out) = out.canonicalize() else {
        return Ok(()); // does not exist yet: it is none of the parts
    };
    for part in parts {
        if part.dir.canonicalize().is_ok_and(|d| d == out) {
            return Err(MergeError::OutIsPart {
                part: part.name.clone(),
            });
        }
    }
    Ok(())
}

/// Copies every part's `artifacts/` into `out/artifacts/`: folders and regular files only
/// (links are not followed, an agent may have left them), never over an existing file.
pub fn copy_artifacts(out: &Path, parts: &[Part]) -> Result<usize, MergeError> {
    let mut copied = 0;
    for part in parts {
        let from = part.dir.join("artifacts");
        // The folder itself is not followed if it is a link (nor is anything inside it).
        match from.symlink_metadata() {
            Ok(m) if m.file_type().is_dir() => {
                copied += copy_tree(&from, &out.join("artifacts"))?;
            }
            Ok(m) if m.file_type().is_symlink() => {
                return Err(MergeError::Artifacts {
                    path: from,
                    message: "is a symbolic link; a part's artifacts must be a folder of its own"
                        .into(),
                });
            }
            _ => {}
        }
    }
    Ok(copied)
}

fn copy_tree(from: &Path, to: &Path) -> Result<usize, MergeError> {
    let err = |path: &Path, e: std::io::Error| MergeError::Artifacts {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    std::fs::create_dir_all(to).map_err(|e| err(to, e))?;
    let mut copied = 0;
    let mut entries: Vec<_> = std::fs::read_dir(from)
        .map_err(|e| err(from, e))?
        .collect::<Result<_, _>>()
        .map_err(|e| err(from, e))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let source = entry.path();
        let target = to.join(entry.file_name());
        let kind = entry.file_type().map_err(|e| err(&source, e))?;
        if kind.is_dir() {
            copied += copy_tree(&source, &target)?;
        } else if kind.is_file() {
            if target.symlink_metadata().is_ok() {
                return Err(MergeError::Artifacts {
                    path: target,
                    message: format!(
                        "exists already (copying {}): merge into a folder without artifacts",
                        source.display()
                    ),
                });
            }
            std::fs::copy(&source, &target).map_err(|e| err(&source, e))?;
            copied += 1;
        }
    }
    Ok(copied)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_ids_are_case_ids_without_their_two_part_check_id() {
        assert_eq!(
            scenario_id("wire.health.xml.ready.report.state"),
            "wire.health.xml.ready"
        );
        assert_eq!(scenario_id("retry.x-2.snapshot.transcript"), "retry.x-2");
    }

    #[test]
    fn the_fingerprint_changes_with_every_input_and_only_with_them() {
        let base = plan_fingerprint("0.1.0", false, [("a", "x.protocol.request".into())], []);
        assert_eq!(base.len(), 16);
        assert_eq!(
            base,
            plan_fingerprint("0.1.0", false, [("a", "x.protocol.request".into())], [])
        );
        for other in [
            plan_fingerprint("0.1.1", false, [("a", "x.protocol.request".into())], []),
            plan_fingerprint("0.1.0", true, [("a", "x.protocol.request".into())], []),
            plan_fingerprint("0.1.0", false, [("b", "x.protocol.request".into())], []),
            plan_fingerprint("0.1.0", false, [("a", "y.protocol.request".into())], []),
            plan_fingerprint("0.1.0", false, [], []),
            // Another agent behind the same name, or an edited scenario.
            plan_fingerprint(
                "0.1.0",
                false,
                [("a", "x.protocol.request".into())],
                ["profile a: python3 other.py".to_owned()],
            ),
        ] {
            assert_ne!(base, other);
        }
    }
}
