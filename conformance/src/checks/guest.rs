//! Guest checks: what the agent made of the simulated VM it provisioned
//! (`fake-wireserver sandbox --guest`), read by the sandbox after every process of the run was
//! gone, so nothing the agent says about itself counts.

use super::{Judgement, Tally};
use crate::observe::Observation;
use wirecheck_results::Evidence;

fn note(text: String) -> Evidence {
    Evidence {
        note: text,
        journal_seq: Vec::new(),
        excerpt: None,
    }
}

/// guest.users: every user the scenario expects (`[expect] users`, the media's `UserName`) is
/// in the guest's `/etc/passwd` after the run. A Ready report without them is a VM no one can
/// log into.
pub fn users(obs: &Observation) -> Judgement {
    let mut t = Tally::new();
    if obs.scenario.guest.is_none() {
        return t.finish("not a guest scenario: no guest to look at");
    }
    t.judged();
    let Some(added) = &obs.guest_users else {
        t.fail(
            "the guest's /etc/passwd could not be read after the run: the agent left it something other than a bounded regular file".to_owned(),
            note("sandbox.json has no guest_users".to_owned()),
        );
        return t.finish("");
    };
    for user in &obs.scenario.expect.users {
        if added.contains(user) {
            t.note(note(format!("user {user:?} is in the guest's /etc/passwd")));
        } else {
            t.fail(
                format!(
                    "user {user:?} is not in the guest's /etc/passwd after the run (it has {} new: {added:?})",
                    added.len()
                ),
                note(format!("guest users added: {added:?}")),
            );
        }
    }
    if obs.scenario.expect.users.is_empty() {
        t.note(note(format!("guest users added: {added:?}")));
    }
    t.finish("")
}
