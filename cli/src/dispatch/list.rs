//! `wirecheck list`: every case id with its title, and with `--agent` what its profile makes of
//! each case (as `wirecheck run` would decide it).

use std::sync::Arc;

use conformance::agent::AgentProfile;
use conformance::catalog::CheckId;
use conformance::runner::{self, Planned};
use conformance::scenario::Scenario;

use crate::cli::ListArgs;
use crate::sources::load_scenarios;
use crate::status::{EXIT_OK, usage};

/// `wirecheck list`; returns the exit status.
pub fn list(args: ListArgs) -> u8 {
    let scenarios = match load_scenarios(&args.sources) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let profile = match &args.agent {
        Some(name) => match args.sources.agents_source().find(name) {
            Ok(p) => Some(Arc::new(p)),
            Err(e) => return usage(e),
        },
        None => None,
    };
    conformance::tools::write_stdout(&list_text(&scenarios, profile.as_ref()));
    EXIT_OK
}

/// `wirecheck list`: one line per case, `id  title`, plus with an agent what its profile makes
/// of the case.
pub fn list_text(scenarios: &[Arc<Scenario>], profile: Option<&Arc<AgentProfile>>) -> String {
    let mut ordered: Vec<&Arc<Scenario>> = scenarios
        .iter()
        .filter(|s| profile.is_none_or(|p| runner::offered(p, s)))
        .collect();
    ordered.sort_by(|a, b| a.id.cmp(&b.id));
    let rows: Vec<(String, String, Option<String>)> = ordered
        .iter()
        .flat_map(|s| {
            s.checks.iter().map(move |c: &CheckId| {
                let c = *c;
                let id = s.case_id(c);
                let status = profile.and_then(|p| case_status(p, s, c, &id));
                (id, runner::case_title(s, c), status)
            })
        })
        .collect();
    // Ids, titles and profile reasons are someone else's text: escaped for the terminal.
    let visible = wirecheck_results::text::visible;
    let width = rows
        .iter()
        .map(|(id, _, _)| visible(id).chars().count())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for (id, title, status) in &rows {
        out.push_str(&format!("{:<width$}  {}", visible(id), visible(title)));
        if let Some(status) = status {
            out.push_str(&format!("  [{}]", visible(status)));
        }
        out.push('\n');
    }
    // As the run reports them: once per flow, not as skipped cases.
    if let Some(p) = profile {
        let filter = conformance::select::CaseFilter::default();
        for u in runner::unclaimed_flows(std::slice::from_ref(p), scenarios, &filter, false) {
            out.push_str(&format!("{}: {u}\n", visible(&u.agent)));
        }
    }
    out.push_str(&format!(
        "{} cases in {} scenarios\n",
        rows.len(),
        ordered.len()
    ));
    out
}

fn case_status(
    profile: &Arc<AgentProfile>,
    s: &Arc<Scenario>,
    c: CheckId,
    id: &str,
) -> Option<String> {
    let planned = Planned {
        profile: Arc::clone(profile),
        scenario: runner::as_offered(profile, s),
        checks: vec![],
        snapshot: false,
    };
    // As `run` decides it, but for whether this machine can run the attach mode.
    conformance::disposition::Disposition::of_case(
        profile,
        id,
        runner::skip_reason(&planned),
        conformance::checks::get(c).needs,
    )
    .list_status()
}
