//! The properties `wirecheck prop` checks: one per (what is generated, health flow). Each is a
//! scenario held in memory whose one agent run takes the generated input, judged by the same
//! checks as the scenario files (`report.*` round trip and limit, `kvp.*`, exit status...):
//! a failure report's text, an in-progress description, or a fault schedule (the fake's
//! answers to a Ready report, [`super::schedule`]), which also judges retries, intervals and
//! the budget.

use std::path::PathBuf;

use crate::agent::Action;
use crate::scenario::{Protocol, Scenario};

use super::input::Input;
use super::schedule::Answer;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Property {
    FailureJson,
    FailureXml,
    InProgressJson,
    InProgressXml,
    ScheduleJson,
    ScheduleXml,
}

/// What a property generates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generates {
    /// A failure report's reason and supporting data.
    FailureReport,
    /// An in-progress description.
    Description,
    /// The fake's answers to a Ready report.
    Schedule,
}

/// The checks of every property: what the agent sent and wrote, not how long it took (the
/// timing checks belong to the fault scenarios).
pub const CHECKS: &[&str] = &[
    "protocol.*",
    "report.*",
    "kvp.*",
    "behaviour.terminal",
    "behaviour.exit",
];

/// The checks of the schedule properties: the text ones, and how the agent met the faults.
pub const SCHEDULE_CHECKS: &[&str] = &[
    "protocol.*",
    "report.*",
    "kvp.*",
    "behaviour.terminal",
    "behaviour.exit",
    "behaviour.budget",
    "behaviour.retry",
    "behaviour.interval",
    "behaviour.rate",
    "behaviour.timeout",
    "behaviour.refresh",
];

impl Property {
    pub const ALL: [Property; 6] = [
        Property::FailureJson,
        Property::FailureXml,
        Property::InProgressJson,
        Property::InProgressXml,
        Property::ScheduleJson,
        Property::ScheduleXml,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Property::FailureJson => "failure.json",
            Property::FailureXml => "failure.xml",
            Property::InProgressJson => "in-progress.json",
            Property::InProgressXml => "in-progress.xml",
            Property::ScheduleJson => "schedule.json",
            Property::ScheduleXml => "schedule.xml",
        }
    }

    pub fn from_name(name: &str) -> Option<Property> {
        Property::ALL.into_iter().find(|p| p.name() == name)
    }

    pub fn names() -> String {
        Property::ALL.map(Property::name).join(", ")
    }

    pub fn generates(self) -> Generates {
        match self {
            Property::FailureJson | Property::FailureXml => Generates::FailureReport,
            Property::InProgressJson | Property::InProgressXml => Generates::Description,
            Property::ScheduleJson | Property::ScheduleXml => Generates::Schedule,
        }
    }

    pub fn is_failure(self) -> bool {
        self.generates() == Generates::FailureReport
    }

    pub fn action(self) -> Action {
        match self.generates() {
            Generates::FailureReport => Action::Failure,
            Generates::Description => Action::InProgress,
            Generates::Schedule => Action::Ready,
        }
    }

    pub fn protocol(self) -> Protocol {
        match self {
            Property::FailureJson | Property::InProgressJson | Property::ScheduleJson => {
                Protocol::Json
            }
            Property::FailureXml | Property::InProgressXml | Property::ScheduleXml => Protocol::Xml,
        }
    }

    /// `prop.<property>`: the case id in the results, and the scenario id its checks run under
    /// (so profile deviations such as `*.kvp.report` apply to it as to any scenario).
    pub fn case_id(self) -> String {
        format!("prop.{}", self.name())
    }

    pub fn title(self) -> String {
        let flow = self.protocol().as_str().to_uppercase();
        match self.generates() {
            Generates::FailureReport => format!(
                "generated failure reports (reason, supporting data), {flow} flow: sent and written exactly as asked"
            ),
            Generates::Description => format!(
                "generated in-progress descriptions, {flow} flow: sent and written exactly as asked"
            ),
            Generates::Schedule => format!(
                "generated fault schedules, {flow} flow: each answer met as the profile's reactions oblige, the report delivered or given up within the budget"
            ),
        }
    }

    /// The scenario file `input` is run as: for a schedule, one `wirecheck run --scenarios`
    /// replays as it stands.
    pub fn scenario_toml(self, input: &Input) -> String {
        let (action, field, expect, checks, faults) = match self.generates() {
            Generates::FailureReport => (
                "failure",
                "reason = \"generated\"\n",
                "[expect]\noutcome = \"reported\"\n",
                CHECKS,
                String::new(),
            ),
            Generates::Description => (
                "in-progress",
                "description = \"generated\"\n",
                "[expect]\noutcome = \"reported\"\n",
                CHECKS,
                String::new(),
            ),
            // Whether a conforming agent gets its report through depends on its reactions and
            // budget, which the checks read from its profile: no outcome is expected.
            // The agent reads its VM id from IMDS when IMDS has a schedule to meet.
            Generates::Schedule => (
                "ready",
                if input.imds.is_empty() {
                    ""
                } else {
                    "vm_id_from_imds = true\n"
                },
                "",
                SCHEDULE_CHECKS,
                input
                    .schedules()
                    .into_iter()
                    .filter(|(_, answers)| !answers.is_empty())
                    .map(|(target, answers)| {
                        format!("\n{}", super::schedule::endpoint_toml(target, answers))
                    })
                    .collect(),
            ),
        };
        format!(
            "# {replay}\nid = {id:?}\ntitle = {title:?}\nchecks = {checks:?}\n\n[agent]\naction = {action:?}\nprotocol = {protocol:?}\n{field}{expect}{faults}",
            replay = "wirecheck prop: generated; replay with wirecheck run --scenarios FILE",
            id = self.case_id(),
            title = self.title(),
            protocol = self.protocol().as_str(),
        )
    }

    /// The in-memory scenario, with `input` as its one run's reason, data or description, or
    /// its schedule as the health endpoint's answers.
    pub fn scenario(self, input: &Input) -> Scenario {
        let text = self.scenario_toml(input);
        let path = PathBuf::from(format!("<wirecheck prop {}>", self.name()));
        // `protocol` names one flow: one instance.
        let mut scenario = Scenario::from_toml_str(&text, &path)
            .expect("the property scenarios are valid")
            .remove(0);
        scenario.name = self.case_id();
        let run = &mut scenario.agent.runs[0];
        run.reason = input.reason.clone();
        run.data = input.data.clone();
        run.description = input.description.clone();
        scenario
    }
}

// The rule lives with the properties (each says what it takes); `Input` knows no property.
impl Input {
    /// Whether `property` takes this input: a failure report a reason (and data), an
    /// in-progress report a description only. The same rule for `--input` and the regression
    /// file, so neither hands an agent an input it cannot be asked to report.
    pub fn fits(&self, property: Property) -> Result<(), String> {
        let name = property.name();
        if property.generates() == Generates::Schedule {
            if !self.has_schedule()
                || self.reason.is_some()
                || self.description.is_some()
                || !self.data.is_empty()
            {
                return Err(format!(
                    "property {name} takes a \"schedule\", \"goalstate\" or \"imds\" only"
                ));
            }
            if !self.goalstate.is_empty() && property.protocol() != Protocol::Xml {
                return Err(format!(
                    "property {name} takes no \"goalstate\" (the goal state is the XML flow's)"
                ));
            }
            if self.schedule.contains(&Answer::Moved) && property.protocol() != Protocol::Xml {
                return Err(format!(
                    "property {name} takes no \"moved\" (a JSON report echoes no goal state)"
                ));
            }
            return Ok(());
        }
        if self.has_schedule() {
            return Err(format!(
                "property {name} takes no \"schedule\" (the schedule.* properties do)"
            ));
        }
        if property.is_failure() {
            if self.reason.is_none() {
                return Err(format!("property {name} takes a \"reason\" (and \"data\")"));
            }
            if self.description.is_some() {
                return Err(format!(
                    "property {name} takes a \"reason\" and \"data\", not a description"
                ));
            }
        } else if self.description.is_none() || self.reason.is_some() || !self.data.is_empty() {
            return Err(format!("property {name} takes a \"description\" only"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::CheckId;

    #[test]
    fn scenarios_carry_the_input_and_the_checks() {
        let input = Input {
            reason: Some("a|b".into()),
            data: vec![("k".into(), "".into())],
            ..Input::default()
        };
        for p in Property::ALL
            .into_iter()
            .filter(|p| p.generates() != Generates::Schedule)
        {
            assert_eq!(Property::from_name(p.name()), Some(p));
            let s = p.scenario(&input);
            assert_eq!(s.id, p.case_id());
            assert_eq!(s.agent.protocol, p.protocol());
            assert_eq!(s.agent.runs.len(), 1);
            assert_eq!(s.agent.runs[0].action, p.action());
            assert!(s.checks.contains(&CheckId::ReportDescription));
            assert!(!s.checks.contains(&CheckId::BehaviourBudget));
        }
        let s = Property::FailureJson.scenario(&input);
        assert_eq!(s.agent.runs[0].reason.as_deref(), Some("a|b"));
        assert_eq!(s.agent.runs[0].data, input.data);
    }

    /// A schedule's scenario file is one `wirecheck run --scenarios` reads as it stands: the
    /// answers on the health endpoint, a Ready run, the timing checks, no expected outcome.
    #[test]
    fn a_schedule_is_a_scenario_file_with_its_answers_and_the_timing_checks() {
        use super::super::schedule::Answer;
        let input = Input {
            schedule: vec![Answer::Status(503), Answer::Status(503), Answer::Throttled],
            ..Input::default()
        };
        for p in [Property::ScheduleJson, Property::ScheduleXml] {
            assert_eq!(Property::from_name(p.name()), Some(p));
            assert!(input.fits(p).is_ok());
            let text = p.scenario_toml(&input);
            assert!(text.contains("status = 503\ntimes = 2"), "{text}");
            let s = Scenario::from_toml_str(&text, std::path::Path::new("replayed.toml"))
                .unwrap()
                .remove(0);
            assert_eq!(s.agent.runs[0].action, Action::Ready);
            assert_eq!(s.agent.protocol, p.protocol());
            assert_eq!(s.expect.outcome, None);
            for check in [
                CheckId::BehaviourBudget,
                CheckId::BehaviourRetry,
                CheckId::BehaviourInterval,
            ] {
                assert!(s.checks.contains(&check), "{check:?}");
            }
            assert!(!s.fake.endpoints.is_empty(), "{text}");
        }
        assert!(
            input
                .fits(Property::FailureJson)
                .unwrap_err()
                .contains("no \"schedule\"")
        );
        let text_only = Input {
            reason: Some("r".into()),
            ..Input::default()
        };
        assert!(
            text_only
                .fits(Property::ScheduleXml)
                .unwrap_err()
                .contains("\"imds\" only")
        );
    }

    /// The goal state's and IMDS's answers are scripted on their endpoints, and an agent
    /// meeting IMDS answers reads its VM id there; the goal state is the XML flow's alone.
    #[test]
    fn goal_state_and_imds_schedules_are_scripted_on_their_endpoints() {
        let input = Input {
            goalstate: vec![Answer::Status(410), Answer::Unusable],
            imds: vec![Answer::Status(404)],
            ..Input::default()
        };
        assert!(input.fits(Property::ScheduleXml).is_ok());
        assert!(
            input
                .fits(Property::ScheduleJson)
                .unwrap_err()
                .contains("no \"goalstate\"")
        );
        let text = Property::ScheduleXml.scenario_toml(&input);
        let s = Scenario::from_toml_str(&text, std::path::Path::new("replayed.toml"))
            .unwrap()
            .remove(0);
        let ids: Vec<String> = s.fake.endpoints.iter().map(|e| e.id.to_string()).collect();
        assert_eq!(ids, ["wireserver.goalstate", "imds.instance"], "{text}");
        assert_eq!(s.agent.vm_id, None, "{text}");
        let health_only = Input {
            schedule: vec![Answer::Status(503)],
            ..Input::default()
        };
        let s = Property::ScheduleJson.scenario(&health_only);
        assert!(s.agent.vm_id.is_some());
    }

    /// A goal state that moves on as a health report is answered 410 is the XML flow's, and its
    /// scenario file (the fake's step `then`) loads as it stands.
    #[test]
    fn a_moved_goal_state_is_the_xml_flows_and_scripted_with_then() {
        let input = Input {
            schedule: vec![Answer::Moved],
            ..Input::default()
        };
        assert!(
            input
                .fits(Property::ScheduleJson)
                .unwrap_err()
                .contains("no \"moved\"")
        );
        assert!(input.fits(Property::ScheduleXml).is_ok());
        let s = Property::ScheduleXml.scenario(&input);
        let step = &s.fake.endpoints[0].steps[0];
        assert_eq!(
            step.then,
            Some(fake_wireserver::scenario::TriggerAction::BumpIncarnation)
        );
    }
}
