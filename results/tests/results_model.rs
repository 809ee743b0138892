//! The results model: verdict spelling, counts, exit codes.

use crate::results_support;

use results_support::fixture;
use wirecheck_results::{AnswerClass, RunResults, Verdict};

#[test]
fn verdicts_serialise_kebab_case_and_round_trip() {
    let spelled: Vec<String> = Verdict::ALL
        .iter()
        .map(|v| serde_json::to_string(v).unwrap())
        .collect();
    assert_eq!(
        spelled,
        [
            "\"pass\"",
            "\"non-strict\"",
            "\"fail\"",
            "\"informational\"",
            "\"unimplemented\"",
            "\"skipped\""
        ]
    );
    for verdict in Verdict::ALL {
        assert_eq!(
            serde_json::to_string(&verdict).unwrap(),
            format!("\"{}\"", verdict.as_str())
        );
        let back: Verdict = serde_json::from_str(&format!("\"{verdict}\"")).unwrap();
        assert_eq!(back, verdict);
    }
    assert!(serde_json::from_str::<Verdict>("\"non_strict\"").is_err());
}

#[test]
fn counts_per_verdict_over_agents() {
    let results = fixture();
    let counts = results.counts();
    assert_eq!(counts.pass, 1);
    assert_eq!(counts.fail, 1);
    assert_eq!(counts.non_strict, 1);
    assert_eq!(counts.informational, 2);
    assert_eq!(counts.unimplemented, 1);
    assert_eq!(counts.skipped, 1);
    assert_eq!(counts.total(), 7);
    assert_eq!(
        counts.to_string(),
        "1 pass, 1 non-strict, 1 fail, 2 informational, 1 unimplemented, 1 skipped"
    );
    assert_eq!(
        results.agents[1].counts().to_string(),
        "1 non-strict, 1 informational"
    );
    assert_eq!(RunResults::new("t", "v").counts().to_string(), "0 cases");
}

#[test]
fn exit_code_fails_on_fail_and_on_non_strict_under_strict() {
    let mut results = fixture();
    assert_eq!(results.exit_code(false), 1, "a fail fails the run");
    assert_eq!(results.exit_code(true), 1);

    // Drop the failing case: non-strict remains.
    results.agents[0]
        .cases
        .retain(|c| c.verdict != Verdict::Fail);
    assert_eq!(results.exit_code(false), 0, "non-strict passes by default");
    assert_eq!(
        results.exit_code(true),
        1,
        "non-strict fails under --strict"
    );

    // Only pass/informational/unimplemented/skipped: always 0.
    for agent in &mut results.agents {
        agent.cases.retain(|c| c.verdict != Verdict::NonStrict);
    }
    assert_eq!(results.exit_code(false), 0);
    assert_eq!(results.exit_code(true), 0);
    assert_eq!(RunResults::new("t", "v").exit_code(true), 0);
}

#[test]
fn answers_are_classed_by_status_family() {
    let mut event = fixture().agents[0].cases[0].timeline.events[0].clone();
    for (answer, class) in [
        ("201", AnswerClass::Success),
        ("307", AnswerClass::Redirect),
        ("403", AnswerClass::ClientError),
        ("503", AnswerClass::ServerError),
        ("hang", AnswerClass::Transport),
        ("reset", AnswerClass::Transport),
        ("403 (throttled)", AnswerClass::ClientError),
        ("201 (delay)", AnswerClass::Success),
        ("200 (partial)", AnswerClass::Transport),
        ("200 (slow)", AnswerClass::Transport),
        ("", AnswerClass::Transport),
    ] {
        event.answer = answer.into();
        assert_eq!(event.answer_class(), class, "{answer}");
    }
}

#[test]
fn stderr_tail_keeps_the_last_lines_within_the_byte_bound() {
    use wirecheck_results::RunEnd;
    let text: String = (1..=40).map(|i| format!("line {i}\n")).collect();
    let tail = RunEnd::tail(&text);
    assert_eq!(tail.lines().count(), RunEnd::TAIL_LINES);
    assert!(
        tail.starts_with("line 29\n") && tail.ends_with("line 40"),
        "{tail}"
    );
    assert_eq!(RunEnd::tail("one\ntwo\n\n"), "one\ntwo");
    assert_eq!(RunEnd::tail(""), "");
    // One long line: its end, cut on a character boundary.
    let long = "é".repeat(3000);
    let tail = RunEnd::tail(&long);
    assert!(tail.len() <= RunEnd::TAIL_BYTES && tail.len() >= RunEnd::TAIL_BYTES - 1);
    assert!(tail.chars().all(|c| c == 'é'));
}
