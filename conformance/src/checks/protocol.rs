//! Protocol checks: method, path spelling, query and headers per endpoint (docs/protocol.md §1,
//! §2). The rules are the fake's request rulebook (`fake_wireserver::inspect`): it records a
//! finding per deviation in the journal, and these checks grade them by the check
//! ([`RequestId::graded_by`]) and severity: error → fail, warning → non-strict, info → a note.

use fake_wireserver::inspect::{self, Aspect, RequestId};
use fake_wireserver::journal::Entry;

use super::{Judgement, Tally, about, line, request_excerpt};
use crate::observe::Observation;

pub fn request(obs: &Observation) -> Judgement {
    let mut t = Tally::new();
    for e in &obs.journal {
        if obs.cut_by_the_runner(e) {
            t.note(about(
                format!(
                    "request #{}: cut off when the runner ended the agent, not judged",
                    e.seq
                ),
                &[e],
                None,
            ));
            continue;
        }
        t.judged();
        if e.endpoint.is_unknown() {
            t.fail(
                format!("{} is not a known endpoint ({})", e.target, e.endpoint),
                about(line(e), &[e], Some(request_excerpt(e, &[]))),
            );
            continue;
        }
        grade(&mut t, e, Aspect::Request);
    }
    t.finish("the agent sent no request")
}

pub fn headers(obs: &Observation) -> Judgement {
    let mut t = Tally::new();
    for e in obs.journal.iter().filter(|e| !obs.cut_by_the_runner(e)) {
        // A request the rulebook did not inspect (an admin path, not HTTP) is not a judged
        // one: no header finding there means nothing.
        let inspected = inspect::judges_headers(e.endpoint) && inspect::inspected(e);
        if inspected || graded(e, Aspect::Headers).next().is_some() {
            t.judged();
        }
        grade(&mut t, e, Aspect::Headers);
    }
    t.finish("the agent sent no request with required headers")
}

/// The entry's request findings `aspect` grades. A finding whose id the rulebook does not
/// know (a journal from another version of the fake) is the request check's.
fn graded(
    e: &Entry,
    aspect: Aspect,
) -> impl Iterator<Item = (&wirecheck_oracle::Finding, Option<RequestId>)> {
    e.findings.iter().filter_map(move |f| {
        let id = RequestId::parse(&f.id);
        let aspects = id.map_or(&[Aspect::Request][..], RequestId::graded_by);
        aspects.contains(&aspect).then_some((f, id))
    })
}

fn grade(t: &mut Tally, e: &Entry, aspect: Aspect) {
    use wirecheck_oracle::Severity;
    for (f, id) in graded(e, aspect) {
        let headers = id.map_or(&[][..], RequestId::headers);
        let evidence = about(
            format!("request #{}: {f}", e.seq),
            &[e],
            Some(request_excerpt(e, headers)),
        );
        match f.severity {
            Severity::Error => t.fail(f.message.clone(), evidence),
            Severity::Warning => t.non_strict(f.message.clone(), evidence),
            Severity::Info => t.note(evidence),
        }
    }
}
