//! Which health flows a scenario file runs on, and the case-id prefix of each instance.
//!
//! A scenario scripts faults against endpoints by id or glob; `wireserver.health.*` is the
//! health report on whichever flow the agent uses, IMDS ids are on every flow. So one file is
//! instantiated once per flow it applies to — JSON (`POST /provisioning/health`) and XML (goal
//! state, then `POST /machine?comp=health`) — unless it says which (`flows = [...]`, or the
//! older `[agent] protocol = "..."` for one), or a fake plan only answers one flow's endpoints
//! (a goal-state fault is XML's; a `wireserver.health.json` fault is JSON's).
//!
//! Instance ids keep the ids that existed before scenarios had flows: the first flow keeps the
//! file's `id`, every other flow appends `.<flow>` (`retry.status.500`, `retry.status.500.xml`);
//! an `id` holding `{flow}` names every instance itself (`report.description.special.{flow}`),
//! and a `title` holding it says the flow (`JSON`, `XML`).

use fake_wireserver::EndpointId;
use serde::Deserialize;

use crate::agent::Capability;

/// Which health flow the agent is asked to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Protocol {
    /// `POST /provisioning/health`.
    #[default]
    Json,
    /// Goal state, then `POST /machine?comp=health`.
    Xml,
}

impl Protocol {
    /// Every flow, in the order a scenario without `flows` runs them.
    pub const ALL: [Protocol; 2] = [Protocol::Json, Protocol::Xml];

    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Json => "json",
            Protocol::Xml => "xml",
        }
    }

    pub fn capability(self) -> Capability {
        match self {
            Protocol::Json => Capability::Json,
            Protocol::Xml => Capability::Xml,
        }
    }
}

/// The placeholder an `id` may hold to name each instance's flow.
pub const FLOW_PLACEHOLDER: &str = "{flow}";

/// The flow an endpoint belongs to, or `None` when every flow may reach it (IMDS, the fake's
/// catch-alls). Exhaustive: a new endpoint must be placed.
pub fn affinity(id: EndpointId) -> Option<Protocol> {
    match id {
        EndpointId::WireserverHealthJson => Some(Protocol::Json),
        // The goal-state flow and what only the goal-state agents (WALinuxAgent) call.
        EndpointId::WireserverVersions
        | EndpointId::WireserverGoalstate
        | EndpointId::WireserverConfig
        | EndpointId::WireserverConfigHosting
        | EndpointId::WireserverConfigExtensions
        | EndpointId::WireserverCertificates
        | EndpointId::WireserverHealthXml
        | EndpointId::WireserverTelemetry
        | EndpointId::WireserverRoleProperties
        | EndpointId::WireserverHealthService
        | EndpointId::WireserverMetadata
        | EndpointId::HostpluginVmsettings
        | EndpointId::HostpluginVersions
        | EndpointId::HostpluginHealth
        | EndpointId::HostpluginStatus
        | EndpointId::HostpluginUnknown => Some(Protocol::Xml),
        EndpointId::WireserverUnknown
        | EndpointId::ImdsInstance
        | EndpointId::ImdsVersions
        | EndpointId::ImdsReprovisiondata
        | EndpointId::ImdsUnknown
        | EndpointId::ProxyUnknownHost => None,
    }
}

/// The one flow whose endpoints are all that plan `index` of `fake` answers (it scripts
/// nothing the other flow would ever ask), or `None`.
pub fn pinned_by(fake: &fake_wireserver::Scenario, index: usize) -> Option<Protocol> {
    let plan = &fake.endpoints[index];
    let mut flows = EndpointId::ALL
        .into_iter()
        .filter(|id| fake.plan_for(*id).is_some_and(|p| std::ptr::eq(p, plan)))
        .map(affinity);
    let first = flows.next()??;
    flows.all(|f| f == Some(first)).then_some(first)
}

/// The flows a scenario runs on: `declared` (in the order written) when given, else every
/// flow its fake plans allow. `Err` names the plan that rules a declared flow out, or the two
/// plans that pin different flows; `plan_field(i)` spells plan `i` in messages.
pub fn flows(
    declared: Option<&[Protocol]>,
    fake: &fake_wireserver::Scenario,
    plan_field: impl Fn(usize) -> String,
) -> Result<Vec<Protocol>, String> {
    let pins: Vec<(usize, Protocol)> = (0..fake.endpoints.len())
        .filter_map(|i| pinned_by(fake, i).map(|f| (i, f)))
        .collect();
    if let Some(&(first, flow)) = pins.first()
        && let Some(&(other, other_flow)) = pins.iter().find(|(_, f)| *f != flow)
    {
        return Err(format!(
            "{} ({}) only answers the {} flow and {} ({}) only the {} flow; one scenario runs both on one flow, so split it",
            plan_field(first),
            fake.endpoints[first].id,
            flow.as_str(),
            plan_field(other),
            fake.endpoints[other].id,
            other_flow.as_str(),
        ));
    }
    let allowed = |f: Protocol| pins.iter().all(|(_, p)| *p == f);
    match declared {
        None => Ok(Protocol::ALL.into_iter().filter(|f| allowed(*f)).collect()),
        Some(declared) => {
            if let Some(f) = declared.iter().find(|f| !allowed(**f)) {
                let (i, pin) = pins[0];
                return Err(format!(
                    "the {} flow is listed, but {} ({}) only answers the {} flow: its fault would never be met there",
                    f.as_str(),
                    plan_field(i),
                    fake.endpoints[i].id,
                    pin.as_str()
                ));
            }
            Ok(declared.to_vec())
        }
    }
}

/// The case-id prefix of the instance of `id` on `flow` (`flows[0]` keeps `id`).
pub fn instance_id(id: &str, flow: Protocol, flows: &[Protocol]) -> String {
    if id.contains(FLOW_PLACEHOLDER) {
        id.replace(FLOW_PLACEHOLDER, flow.as_str())
    } else if flows.first() == Some(&flow) {
        id.to_owned()
    } else {
        format!("{id}.{}", flow.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake(plans: &[&str]) -> fake_wireserver::Scenario {
        let mut text = String::new();
        for id in plans {
            text.push_str(&format!(
                "[[endpoint]]\nid = \"{id}\"\n[[endpoint.step]]\nkind = \"respond\"\nstatus = 500\n"
            ));
        }
        fake_wireserver::Scenario::from_toml_str(&text, "t").unwrap()
    }

    fn field(i: usize) -> String {
        format!("fake.endpoint[{i}]")
    }

    #[test]
    fn a_health_or_imds_fault_runs_on_every_flow_in_order() {
        for plans in [
            &["wireserver.health.*"][..],
            &["imds.instance"],
            &["imds.*", "wireserver.health.*"],
            &[],
        ] {
            assert_eq!(
                flows(None, &fake(plans), field).unwrap(),
                [Protocol::Json, Protocol::Xml],
                "{plans:?}"
            );
        }
    }

    #[test]
    fn a_plan_that_answers_one_flow_pins_the_scenario_to_it() {
        let xml = fake(&["wireserver.goalstate", "imds.instance"]);
        assert_eq!(flows(None, &xml, field).unwrap(), [Protocol::Xml]);
        let json = fake(&["wireserver.health.json"]);
        assert_eq!(flows(None, &json, field).unwrap(), [Protocol::Json]);
        // A plan shadowed by an earlier one answers nothing, so pins nothing.
        let shadowed = fake(&["wireserver.*", "wireserver.goalstate"]);
        assert_eq!(flows(None, &shadowed, field).unwrap().len(), 2);
    }

    #[test]
    fn plans_pinning_different_flows_or_a_declared_flow_they_rule_out_are_refused() {
        let both = fake(&["wireserver.health.json", "wireserver.goalstate"]);
        let e = flows(None, &both, field).unwrap_err();
        assert!(
            e.contains("fake.endpoint[0] (wireserver.health.json) only answers the json flow")
                && e.contains("fake.endpoint[1] (wireserver.goalstate) only the xml flow"),
            "{e}"
        );
        let goal = fake(&["wireserver.goalstate"]);
        let e = flows(Some(&[Protocol::Json, Protocol::Xml]), &goal, field).unwrap_err();
        assert!(
            e.contains("the json flow is listed, but fake.endpoint[0] (wireserver.goalstate)"),
            "{e}"
        );
        assert_eq!(
            flows(Some(&[Protocol::Xml]), &goal, field).unwrap(),
            [Protocol::Xml]
        );
    }

    #[test]
    fn instance_ids_keep_the_first_flow_bare_or_name_each_flow() {
        let both = [Protocol::Json, Protocol::Xml];
        assert_eq!(
            instance_id("retry.status.500", Protocol::Json, &both),
            "retry.status.500"
        );
        assert_eq!(
            instance_id("retry.status.500", Protocol::Xml, &both),
            "retry.status.500.xml"
        );
        let xml_first = [Protocol::Xml, Protocol::Json];
        assert_eq!(
            instance_id("wireserver.unreachable.ready", Protocol::Json, &xml_first),
            "wireserver.unreachable.ready.json"
        );
        assert_eq!(
            instance_id("retry.gone.health.{flow}", Protocol::Json, &both),
            "retry.gone.health.json"
        );
    }
}
