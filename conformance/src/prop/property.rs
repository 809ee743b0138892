//! The properties `wirecheck prop` checks: one per (report kind, health flow). Each is a
//! scenario held in memory whose one agent run takes the generated input, judged by the same
//! checks as the scenario files (`report.*` round trip and limit, `kvp.*`, exit status...).

use std::path::PathBuf;

use crate::agent::Action;
use crate::scenario::{Protocol, Scenario};

use super::input::Input;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Property {
    FailureJson,
    FailureXml,
    InProgressJson,
    InProgressXml,
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

impl Property {
    pub const ALL: [Property; 4] = [
        Property::FailureJson,
        Property::FailureXml,
        Property::InProgressJson,
        Property::InProgressXml,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Property::FailureJson => "failure.json",
            Property::FailureXml => "failure.xml",
            Property::InProgressJson => "in-progress.json",
            Property::InProgressXml => "in-progress.xml",
        }
    }

    pub fn from_name(name: &str) -> Option<Property> {
        Property::ALL.into_iter().find(|p| p.name() == name)
    }

    pub fn names() -> String {
        Property::ALL.map(Property::name).join(", ")
    }

    pub fn is_failure(self) -> bool {
        matches!(self, Property::FailureJson | Property::FailureXml)
    }

    pub fn action(self) -> Action {
        if self.is_failure() {
            Action::Failure
        } else {
            Action::InProgress
        }
    }

    pub fn protocol(self) -> Protocol {
        match self {
            Property::FailureJson | Property::InProgressJson => Protocol::Json,
            Property::FailureXml | Property::InProgressXml => Protocol::Xml,
        }
    }

    /// `prop.<property>`: the case id in the results, and the scenario id its checks run under
    /// (so profile deviations such as `*.kvp.report` apply to it as to any scenario).
    pub fn case_id(self) -> String {
        format!("prop.{}", self.name())
    }

    pub fn title(self) -> String {
        let what = if self.is_failure() {
            "failure reports (reason, supporting data)"
        } else {
            "in-progress descriptions"
        };
        format!(
            "generated {what}, {} flow: sent and written exactly as asked",
            self.protocol().as_str().to_uppercase()
        )
    }

    /// The in-memory scenario, with `input` as its one run's reason, data or description.
    pub fn scenario(self, input: &Input) -> Scenario {
        let (action, field) = if self.is_failure() {
            ("failure", "reason = \"generated\"")
        } else {
            ("in-progress", "description = \"generated\"")
        };
        let text = format!(
            "id = {id:?}\ntitle = {title:?}\nchecks = {checks:?}\n[agent]\naction = {action:?}\nprotocol = {protocol:?}\n{field}\n[expect]\noutcome = \"reported\"\n",
            id = self.case_id(),
            title = self.title(),
            checks = CHECKS,
            protocol = self.protocol().as_str(),
        );
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
            description: None,
        };
        for p in Property::ALL {
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
}
