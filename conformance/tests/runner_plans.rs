//! The fake as the runner uses it: a scenario plan yields exactly its scripted sequence, then
//! its end policy. Generated plans drive an in-process fake; the journal's answers are read
//! back (the checks rely on this to know what the agent was told).

use fake_wireserver::{EndPolicy, Fake, FakeConfig, Scenario, Step};
use proptest::prelude::*;
use wirecheck_test_support::http::{exchange_to_close, post};

const STATUSES: [u16; 10] = [200, 201, 202, 400, 401, 404, 410, 429, 500, 503];

/// What the fake answers a JSON health report when no step applies.
const DEFAULT_STATUS: u16 = 201;

fn policy() -> impl Strategy<Value = EndPolicy> {
    prop_oneof![
        Just(EndPolicy::RepeatLast),
        Just(EndPolicy::Cycle),
        Just(EndPolicy::Default)
    ]
}

fn steps() -> impl Strategy<Value = Vec<(u16, u32)>> {
    prop::collection::vec((prop::sample::select(STATUSES.to_vec()), 1u32..=3), 1..=4)
}

/// The statuses a plan must produce for `n` requests, with (step index, repetition) when a
/// step answered.
fn expected(steps: &[(u16, u32)], end: EndPolicy, n: usize) -> Vec<(u16, Option<(usize, u32)>)> {
    let scripted: Vec<(u16, (usize, u32))> = steps
        .iter()
        .enumerate()
        .flat_map(|(i, (status, times))| (1..=*times).map(move |r| (*status, (i, r))))
        .collect();
    (0..n)
        .map(|k| {
            if k < scripted.len() {
                let (s, at) = scripted[k];
                return (s, Some(at));
            }
            match end {
                EndPolicy::Default => (DEFAULT_STATUS, None),
                EndPolicy::RepeatLast => {
                    let (s, (i, _)) = *scripted.last().unwrap();
                    // The last step keeps answering; its repetition count keeps growing.
                    let r = steps[i].1 + (k - scripted.len() + 1) as u32;
                    (s, Some((i, r)))
                }
                EndPolicy::Cycle => {
                    let (s, (i, r)) = scripted[k % scripted.len()];
                    (s, Some((i, r)))
                }
            }
        })
        .collect()
}

/// A JSON health report; the answer as it came on the wire.
async fn report(addr: std::net::SocketAddr) -> String {
    let request = post(
        "/provisioning/health",
        "168.63.129.16",
        &[("Content-Type", "application/json")],
        r#"{"state":"Ready"}"#,
    );
    exchange_to_close(addr, &request, std::time::Duration::from_secs(10))
        .await
        .raw_text()
}

fn observed(steps: &[(u16, u32)], end: EndPolicy, n: usize) -> Vec<(u16, Option<(usize, u32)>)> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let plan: Vec<Step> = steps
            .iter()
            .map(|(s, t)| Step::respond(*s).times(*t))
            .collect();
        let scenario = Scenario::new().endpoint("wireserver.health.json", end, plan);
        let fake = Fake::start(FakeConfig::default().scenario(scenario))
            .await
            .unwrap();
        let addr = fake.wireserver_addr().unwrap();
        let mut lines = Vec::new();
        for _ in 0..n {
            lines.push(report(addr).await);
        }
        let journal = fake.journal();
        fake.shutdown().await.unwrap();
        assert_eq!(journal.len(), n);
        journal
            .iter()
            .zip(&lines)
            .map(|(e, wire)| {
                let status = e.answer.status.expect("every request answered");
                // The journal says what went on the wire.
                assert!(
                    wire.starts_with(&format!("HTTP/1.1 {status} ")),
                    "{wire:?} vs {status}"
                );
                (status, e.answer.step.as_ref().map(|s| (s.index, s.repeat)))
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn a_plan_yields_its_script_then_its_end_policy(steps in steps(), end in policy(), extra in 0usize..5) {
        let n = steps.iter().map(|(_, t)| *t as usize).sum::<usize>() + extra;
        prop_assert_eq!(observed(&steps, end, n), expected(&steps, end, n));
    }
}

#[test]
fn the_expectation_model_itself() {
    let steps = [(503, 2), (201, 1)];
    assert_eq!(
        expected(&steps, EndPolicy::Cycle, 5),
        [
            (503, Some((0, 1))),
            (503, Some((0, 2))),
            (201, Some((1, 1))),
            (503, Some((0, 1))),
            (503, Some((0, 2)))
        ]
    );
    assert_eq!(
        expected(&steps, EndPolicy::Default, 4)[3],
        (DEFAULT_STATUS, None)
    );
    assert_eq!(
        expected(&steps, EndPolicy::RepeatLast, 5)[4],
        (201, Some((1, 3)))
    );
}
