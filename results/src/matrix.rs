//! `wirecheck matrix RESULTS`: the compatibility matrix of a run as a markdown table,
//! one row per scenario group (the first part of the case id: `wire`, `retry`, `transport`,
//! ...), one column per agent, verdict counts in each cell. The matrix of docs/matrix.md is this
//! command's output (a test below holds the page to it).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::json;
use crate::markdown::escape;
use crate::model::{RunResults, Verdict, VerdictCounts};

/// A results folder or file `wirecheck matrix` cannot use, and why.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct MatrixError {
    pub path: PathBuf,
    pub message: String,
}

/// `path`: a results folder (its results.json is read) or a results.json.
pub fn read(path: &Path) -> Result<RunResults, MatrixError> {
    let file = if path.is_dir() {
        path.join(json::FILE_NAME)
    } else {
        path.to_path_buf()
    };
    if path.is_dir() && !file.is_file() {
        return Err(MatrixError {
            path: path.to_path_buf(),
            message: format!(
                "a folder without a {}; expected a results folder written by `wirecheck run` or a results.json",
                json::FILE_NAME
            ),
        });
    }
    let path = file.as_path();
    json::read(path).map_err(|e| MatrixError {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// The scenario group of a case id: its first dotted part.
fn group(case_id: &str) -> &str {
    case_id.split('.').next().unwrap_or(case_id)
}

/// A scenario group as code when it is a plain name (`wire`), else as escaped text.
fn group_cell(name: &str) -> String {
    let plain = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if plain {
        format!("`{name}`")
    } else {
        escape(name, 120)
    }
}

/// The markdown table (pure: same results, same bytes).
pub fn render(results: &RunResults) -> String {
    // Names come from someone's results.json, and the table is Markdown (a CI page renders
    // it): escaped as Markdown text (control characters made visible too).
    let agents: Vec<String> = results
        .agents
        .iter()
        .map(|a| escape(&a.agent, 120))
        .collect();
    // group -> per-agent counts, groups sorted by name.
    let mut rows: BTreeMap<&str, Vec<VerdictCounts>> = BTreeMap::new();
    let mut totals = vec![VerdictCounts::default(); agents.len()];
    for (i, agent) in results.agents.iter().enumerate() {
        for case in &agent.cases {
            rows.entry(group(&case.id))
                .or_insert_with(|| vec![VerdictCounts::default(); agents.len()])[i]
                .add(case.verdict);
            totals[i].add(case.verdict);
        }
    }
    let mut out = String::new();
    out.push_str(&format!("| scenario group | {} |\n", agents.join(" | ")));
    out.push_str(&format!("|---|{}\n", "---|".repeat(agents.len())));
    for (name, counts) in &rows {
        out.push_str(&format!("| {} | {} |\n", group_cell(name), cells(counts)));
    }
    out.push_str(&format!("| **all** | {} |\n", cells(&totals)));
    if !results.unclaimed_flows.is_empty() {
        let unclaimed: Vec<String> = results
            .agents
            .iter()
            .map(|a| unclaimed_cell(results, &a.agent))
            .collect();
        out.push_str(&format!(
            "| {UNCLAIMED_ROW} | {} |\n",
            unclaimed.join(" | ")
        ));
    }
    out.push_str(&format!(
        "\nVerdict counts per case (a case is a scenario × check), from a run of wirecheck {} on {}.\n",
        escape(&results.wirecheck_version, 40),
        escape(&results.started, 40)
    ));
    out
}

/// The row naming, once per agent, what it was not offered (the flows it does not claim, the
/// scenarios without a guest for an agent that runs only in one), so those scenarios are in no
/// other row.
const UNCLAIMED_ROW: &str = "*not offered*";

/// `json (30 scenarios, 212 cases)`, `; `-joined, or `–`.
fn unclaimed_cell(results: &RunResults, agent: &str) -> String {
    let flows: Vec<String> = results
        .unclaimed_flows
        .iter()
        .filter(|u| u.agent == agent)
        .map(|u| {
            let plural = |n: usize| if n == 1 { "" } else { "s" };
            format!(
                "{} ({} scenario{}, {} case{})",
                u.flow.label(),
                u.scenarios,
                plural(u.scenarios),
                u.cases,
                plural(u.cases)
            )
        })
        .collect();
    if flows.is_empty() {
        "–".into()
    } else {
        flows.join("; ")
    }
}

fn cells(counts: &[VerdictCounts]) -> String {
    counts.iter().map(cell).collect::<Vec<_>>().join(" | ")
}

/// `12 pass, 2 non-strict, 5 skipped` (zero counts left out; `–` when there are none).
fn cell(counts: &VerdictCounts) -> String {
    let parts: Vec<String> = Verdict::ALL
        .iter()
        .filter(|v| counts.get(**v) > 0)
        .map(|v| format!("{} {}", counts.get(*v), v.as_str()))
        .collect();
    if parts.is_empty() {
        "–".into()
    } else {
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{AgentResults, CaseResult, Timeline};

    fn case(id: &str, verdict: Verdict) -> CaseResult {
        CaseResult {
            id: id.into(),
            title: id.into(),
            scenario: "s".into(),
            verdict,
            reason: (verdict != Verdict::Pass).then(|| "why".into()),
            evidence: vec![],
            duration_ms: 0,
            timeline: Timeline::default(),
            artifacts: None,
            not_judged: None,
            attempts: None,
        }
    }

    #[test]
    fn groups_by_the_first_part_of_the_case_id_and_counts_per_agent() {
        let mut results = RunResults::new("2026-01-02T03:04:05.000Z", "0.1.0");
        results.agents = vec![
            AgentResults {
                agent: "a".into(),
                cases: vec![
                    case("retry.x.behaviour.retry", Verdict::Pass),
                    case("retry.y.behaviour.retry", Verdict::NonStrict),
                    case("wire.z.report.state", Verdict::Pass),
                ],
            },
            AgentResults {
                agent: "b".into(),
                cases: vec![case("retry.x.behaviour.retry", Verdict::Skipped)],
            },
        ];
        assert_eq!(
            render(&results),
            "| scenario group | a | b |\n\
             |---|---|---|\n\
             | `retry` | 1 pass, 1 non-strict | 1 skipped |\n\
             | `wire` | 1 pass | – |\n\
             | **all** | 2 pass, 1 non-strict | 1 skipped |\n\
             \nVerdict counts per case (a case is a scenario × check), from a run of wirecheck 0.1.0 on 2026-01-02T03:04:05.000Z.\n"
        );
    }

    /// docs/matrix.md shows `wirecheck matrix` output between its two markers: read back into
    /// results (one case per verdict counted) and rendered again, it is the same bytes, so the
    /// page cannot hold a table the command could not have printed (a cell edited by hand
    /// without its total, a verdict spelled another way, a group out of order).
    #[test]
    fn docs_matrix_is_wirecheck_matrix_output() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/matrix.md");
        let page = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        let table = between_markers(&page);
        let results = read_back(table);
        assert_eq!(
            results.agents.len(),
            14,
            "the reporter and the thirteen real-agent profiles of the matrix run"
        );
        assert_eq!(render(&results), table);
    }

    #[test]
    fn flows_an_agent_does_not_claim_are_one_row_not_skipped_cases() {
        let mut results = RunResults::new("2026-01-02T03:04:05.000Z", "0.1.0");
        results.agents = vec![
            AgentResults {
                agent: "a".into(),
                cases: vec![case("retry.x.xml.behaviour.retry", Verdict::Pass)],
            },
            AgentResults {
                agent: "b".into(),
                cases: vec![case("retry.x.behaviour.retry", Verdict::Pass)],
            },
        ];
        results.unclaimed_flows = vec![crate::model::UnclaimedFlow {
            agent: "a".into(),
            flow: crate::model::NotOffered::Json,
            scenarios: 30,
            cases: 212,
        }];
        let table = render(&results);
        assert!(
            table.contains("| *not offered* | json (30 scenarios, 212 cases) | – |\n"),
            "{table}"
        );
        assert!(!table.contains("skipped"), "{table}");
        assert_eq!(render(&read_back(&table)), table);
    }

    #[test]
    fn a_hand_edited_cell_is_caught_by_reading_the_table_back() {
        let mut results = RunResults::new("2026-01-02T03:04:05.000Z", "0.1.0");
        results.agents = vec![AgentResults {
            agent: "a".into(),
            cases: vec![
                case("retry.x.behaviour.retry", Verdict::Pass),
                case("wire.z.report.state", Verdict::Fail),
            ],
        }];
        let table = render(&results);
        assert_eq!(render(&read_back(&table)), table);
        let edited = table.replace("| `wire` | 1 fail |", "| `wire` | 1 pass |");
        assert_ne!(edited, table);
        assert_ne!(render(&read_back(&edited)), edited);
    }

    const BEGIN: &str = "<!-- begin: wirecheck matrix output -->\n";
    const END: &str = "<!-- end: wirecheck matrix output -->\n";

    fn between_markers(page: &str) -> &str {
        let start = page
            .find(BEGIN)
            .expect("docs/matrix.md marks where the output begins")
            + BEGIN.len();
        let len = page[start..]
            .find(END)
            .expect("docs/matrix.md marks where the output ends");
        &page[start..start + len]
    }

    /// The results a table counts: per group and agent, one case per verdict counted; the run's
    /// version and start from the closing line.
    fn read_back(table: &str) -> RunResults {
        let row = |line: &str| -> Vec<String> {
            let inner = line
                .strip_prefix("| ")
                .and_then(|l| l.strip_suffix(" |"))
                .unwrap_or_else(|| panic!("not a table row: {line:?}"));
            inner.split(" | ").map(str::to_owned).collect()
        };
        let mut lines = table.lines();
        let header = row(lines.next().expect("a header row"));
        assert_eq!(header[0], "scenario group");
        let mut agents: Vec<AgentResults> = header[1..]
            .iter()
            .map(|name| AgentResults {
                agent: name.clone(),
                cases: vec![],
            })
            .collect();
        lines.next().expect("the alignment row");
        for line in lines.by_ref() {
            let cells = row(line);
            if cells[0] == "**all**" {
                break;
            }
            let group = cells[0].trim_matches('`');
            assert_eq!(cells.len(), agents.len() + 1, "{line}");
            for (agent, cell) in agents.iter_mut().zip(&cells[1..]) {
                if cell == "–" {
                    continue;
                }
                for part in cell.split(", ") {
                    let (count, name) = part.split_once(' ').expect("`N verdict`");
                    let verdict = *Verdict::ALL
                        .iter()
                        .find(|v| v.as_str() == name)
                        .unwrap_or_else(|| panic!("no verdict {name:?}"));
                    let count: usize = count.parse().expect("a count");
                    for n in 0..count {
                        let id = format!("{group}.case{}.check", agent.cases.len() + n);
                        agent.cases.push(case(&id, verdict));
                    }
                }
            }
        }
        let mut unclaimed = Vec::new();
        let mut closing = lines.find(|l| !l.is_empty()).expect("the closing line");
        if let Some(row_cells) = closing
            .strip_prefix(&format!("| {UNCLAIMED_ROW} | "))
            .map(|rest| row(&format!("| x | {rest}")))
        {
            for (agent, cell) in agents.iter().zip(&row_cells[1..]) {
                for flow in cell.split("; ").filter(|c| *c != "–") {
                    let (name, counts) = flow.split_once(" (").expect("`flow (counts)`");
                    let numbers: Vec<usize> = counts
                        .split(|c: char| !c.is_ascii_digit())
                        .filter(|n| !n.is_empty())
                        .map(|n| n.parse().unwrap())
                        .collect();
                    unclaimed.push(crate::model::UnclaimedFlow {
                        agent: agent.agent.clone(),
                        flow: crate::model::NotOffered::from_label(name).expect("a flow"),
                        scenarios: numbers[0],
                        cases: numbers[1],
                    });
                }
            }
            closing = lines.find(|l| !l.is_empty()).expect("the closing line");
        }
        let (_, run) = closing
            .split_once("from a run of wirecheck ")
            .expect("the closing line names the run");
        let (version, started) = run.split_once(" on ").expect("version on date");
        let mut results = RunResults::new(started.trim_end_matches('.'), version);
        results.agents = agents;
        results.unclaimed_flows = unclaimed;
        results
    }
}
