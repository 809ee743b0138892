//! The documents the fake serves by default, kept as data files in `defaults/` and rendered with
//! the scenario's overrides. Realistic shapes (docs/protocol.md §1.2, §3): a goal state every client
//! accepts, versions listing 2012-11-30 as Preferred and Supported, an IMDS instance document
//! with the fields azure-init, afterburn and cloud-init read.

use std::sync::LazyLock;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::oracle::ServedIds;
use crate::scenario::{GoalStateOverrides, ImdsOverrides, Scenario};

pub(crate) const VERSIONS_XML: &str = include_str!("../defaults/versions.xml");
pub(crate) const GOALSTATE_XML: &str = include_str!("../defaults/goalstate.xml");
pub(crate) const SHAREDCONFIG_XML: &str = include_str!("../defaults/sharedconfig.xml");
pub(crate) const CERTIFICATES_XML: &str = include_str!("../defaults/certificates.xml");
pub(crate) const HOSTINGENVIRONMENTCONFIG_XML: &str =
    include_str!("../defaults/hostingenvironmentconfig.xml");
pub(crate) const EXTENSIONSCONFIG_XML: &str = include_str!("../defaults/extensionsconfig.xml");
pub(crate) const HOSTPLUGIN_VERSIONS_JSON: &str =
    include_str!("../defaults/hostplugin-versions.json");
pub(crate) const OVF_ENV_XML: &str = include_str!("../defaults/ovf-env.xml");
pub(crate) const INSTANCE_JSON: &str = include_str!("../defaults/instance.json");
pub(crate) const IMDS_VERSIONS_JSON: &str = include_str!("../defaults/imds-versions.json");
pub(crate) const DEFAULTS_TOML: &str = include_str!("../defaults/defaults.toml");

/// The platform's throttling body (docs/protocol.md §8.1, `vectors/http/platform/throttled-403.json`).
pub const THROTTLED_BODY: &str = "<?xml version=\"1.0\" encoding=\"utf-8\"?> <Error xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" xmlns:xsd=\"http://www.w3.org/2001/XMLSchema\"> <Code>RequestRateLimitExceeded</Code> <Message>The request was denied because of too many requests by this client. Please retry the request after a few seconds.</Message> <Details></Details> </Error>";
pub(crate) const XML_CONTENT_TYPE: &str = "text/xml; charset=utf-8";
pub(crate) const JSON_CONTENT_TYPE: &str = "application/json; charset=utf-8";
pub(crate) const TEXT_CONTENT_TYPE: &str = "text/plain; charset=utf-8";
/// What the wireserver says it is.
pub const SERVER_HEADER: &str = "Microsoft-IIS/10.0";

#[derive(Deserialize)]
struct DefaultsFile {
    goalstate: GoalStateOverrides,
}

static DEFAULT_GOALSTATE: LazyLock<GoalStateOverrides> = LazyLock::new(|| {
    // Checked by the `embedded_defaults_parse` test; an empty set of overrides is the fallback.
    toml::from_str::<DefaultsFile>(DEFAULTS_TOML)
        .map(|d| d.goalstate)
        .unwrap_or_default()
});

static DEFAULT_INSTANCE: LazyLock<Value> =
    LazyLock::new(|| serde_json::from_str(INSTANCE_JSON).unwrap_or_else(|_| json!({})));

/// The documents of one scenario: defaults with the scenario's overrides applied.
#[derive(Debug, Clone)]
pub struct Documents {
    pub(crate) incarnation: String,
    pub(crate) container_id: String,
    pub(crate) instance_id: String,
    pub(crate) certificates: bool,
    pub(crate) hosting_environment_config: bool,
    pub(crate) shared_config: bool,
    pub(crate) extensions_config: bool,
    instance: Value,
    pps_type: String,
    /// `instance_json(false)` and `instance_json(true)` serialized, computed once: the documents
    /// are rebuilt whenever a scenario is loaded and nothing else changes the instance document.
    /// Shared bytes, so answering with them copies nothing.
    instance_text: [axum::body::Bytes; 2],
}

impl Documents {
    /// The documents a scenario serves (its overrides on the defaults).
    pub fn new(scenario: &Scenario) -> Self {
        let gs = effective_goalstate(&scenario.goalstate);
        let imds = &scenario.imds;
        let mut instance = imds
            .instance_document
            .clone()
            .unwrap_or_else(|| DEFAULT_INSTANCE.clone());
        if !instance.is_object() {
            // Only reachable from code (files are validated): keep the overrides working.
            instance = json!({});
        }
        let set = |doc: &mut Value, path: &[&str], value: &str| {
            let mut node = doc;
            for key in &path[..path.len() - 1] {
                if !node.get(*key).is_some_and(Value::is_object) {
                    node[*key] = json!({});
                }
                node = &mut node[*key];
            }
            node[path[path.len() - 1]] = Value::String(value.to_owned());
        };
        if let Some(v) = &imds.vm_id {
            set(&mut instance, &["compute", "vmId"], v);
        }
        if let Some(v) = &imds.name {
            set(&mut instance, &["compute", "name"], v);
            set(&mut instance, &["compute", "osProfile", "computerName"], v);
        }
        if let Some(v) = &imds.vm_size {
            set(&mut instance, &["compute", "vmSize"], v);
        }
        if let Some(v) = &imds.admin_username {
            set(&mut instance, &["compute", "osProfile", "adminUsername"], v);
        }
        let mut docs = Documents {
            incarnation: gs.incarnation.unwrap_or_else(|| "1".into()),
            container_id: gs.container_id.unwrap_or_default(),
            instance_id: gs.instance_id.unwrap_or_default(),
            certificates: gs.certificates.unwrap_or(true),
            hosting_environment_config: gs.hosting_environment_config.unwrap_or(true),
            shared_config: gs.shared_config.unwrap_or(true),
            extensions_config: gs.extensions_config.unwrap_or(false),
            instance,
            pps_type: imds.pps_type.clone().unwrap_or_else(|| "None".into()),
            instance_text: Default::default(),
        };
        docs.instance_text = [
            docs.instance_json(false).to_string().into(),
            docs.instance_json(true).to_string().into(),
        ];
        docs
    }

    /// The ids served after `bumps` incarnation bumps.
    pub fn served_ids(&self, bumps: u64) -> ServedIds {
        let incarnation = if bumps == 0 {
            self.incarnation.clone()
        } else {
            // Validated numeric when a bump trigger exists; keep the text otherwise.
            match self.incarnation.parse::<u64>() {
                Ok(n) => n.saturating_add(bumps).to_string(),
                Err(_) => self.incarnation.clone(),
            }
        };
        ServedIds {
            incarnation,
            container_id: self.container_id.clone(),
            instance_id: self.instance_id.clone(),
        }
    }

    /// `MachineRole_IN_0` of `<deployment>.MachineRole_IN_0`: the name used in config URLs and
    /// in the shared config's `Instance id`.
    pub(crate) fn role_instance(instance_id: &str) -> &str {
        instance_id.rsplit('.').next().unwrap_or(instance_id)
    }

    /// `MachineRole` of `MachineRole_IN_0`: the role name in the hosting environment config.
    pub(crate) fn role_name(instance_id: &str) -> &str {
        let role = Self::role_instance(instance_id);
        match role.rsplit_once("_IN_") {
            Some((name, n)) if !name.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => name,
            _ => role,
        }
    }

    /// Config/certificates URLs as the goal state names them, on the host the agent used.
    /// `comp` is `certificates`, or the config `type` (`sharedConfig`,
    /// `hostingEnvironmentConfig`, `extensionsConfig`).
    pub(crate) fn config_url(base_url: &str, ids: &ServedIds, comp: &str) -> String {
        let role = Self::role_instance(&ids.instance_id);
        let tail = match comp {
            "certificates" => format!("comp=certificates&incarnation={}", ids.incarnation),
            "config" => format!(
                "comp=config&type=sharedConfig&incarnation={}",
                ids.incarnation
            ),
            kind => format!("comp=config&type={kind}&incarnation={}", ids.incarnation),
        };
        format!("{base_url}/machine/{}/{role}?{tail}", ids.container_id)
    }

    pub(crate) fn goalstate_xml(&self, ids: &ServedIds, base_url: &str) -> String {
        // Element order as the platform writes it (WALA's fixture goal_state.xml).
        let element = |listed: bool, name: &str, comp: &str| {
            if listed {
                format!(
                    "\n          <{name}>{}</{name}>",
                    xml_escape(&Self::config_url(base_url, ids, comp))
                )
            } else {
                String::new()
            }
        };
        let certificates_element = element(self.certificates, "Certificates", "certificates");
        render(
            GOALSTATE_XML,
            &[
                ("incarnation", &xml_escape(&ids.incarnation)),
                ("container_id", &xml_escape(&ids.container_id)),
                ("instance_id", &xml_escape(&ids.instance_id)),
                (
                    "role_instance",
                    &xml_escape(Self::role_instance(&ids.instance_id)),
                ),
                (
                    "hosting_environment_element",
                    &element(
                        self.hosting_environment_config,
                        "HostingEnvironmentConfig",
                        "hostingEnvironmentConfig",
                    ),
                ),
                (
                    "shared_config_element",
                    &element(self.shared_config, "SharedConfig", "config"),
                ),
                (
                    "extensions_config_element",
                    &element(
                        self.extensions_config,
                        "ExtensionsConfig",
                        "extensionsConfig",
                    ),
                ),
                ("certificates_element", &certificates_element),
            ],
        )
    }

    pub(crate) fn shared_config_xml(&self, ids: &ServedIds) -> String {
        render(
            SHAREDCONFIG_XML,
            &[
                ("incarnation", &xml_escape(&ids.incarnation)),
                ("container_id", &xml_escape(&ids.container_id)),
                (
                    "role_instance",
                    &xml_escape(Self::role_instance(&ids.instance_id)),
                ),
            ],
        )
    }

    pub(crate) fn hosting_environment_config_xml(&self, ids: &ServedIds) -> String {
        render(
            HOSTINGENVIRONMENTCONFIG_XML,
            &[
                ("incarnation", &xml_escape(&ids.incarnation)),
                ("container_id", &xml_escape(&ids.container_id)),
                (
                    "role_instance",
                    &xml_escape(Self::role_instance(&ids.instance_id)),
                ),
                ("role_name", &xml_escape(Self::role_name(&ids.instance_id))),
            ],
        )
    }

    pub(crate) fn extensions_config_xml(&self, ids: &ServedIds) -> String {
        render(
            EXTENSIONSCONFIG_XML,
            &[("incarnation", &xml_escape(&ids.incarnation))],
        )
    }

    pub(crate) fn certificates_xml(&self, ids: &ServedIds) -> String {
        render(
            CERTIFICATES_XML,
            &[("incarnation", &xml_escape(&ids.incarnation))],
        )
    }

    /// The IMDS instance document; `extended=true` adds `extended.compute`.
    pub(crate) fn instance_json(&self, extended: bool) -> Value {
        let mut doc = self.instance.clone();
        if extended && let Some(obj) = doc.as_object_mut() {
            obj.insert(
                "extended".into(),
                json!({"compute": {"hasCustomData": false, "ppsType": self.pps_type}}),
            );
        }
        doc
    }

    /// [`Self::instance_json`] as the JSON text served (cached; the unit tests read it).
    #[cfg(test)]
    pub(crate) fn instance_json_text(&self, extended: bool) -> &str {
        // Built from a String, so always UTF-8.
        std::str::from_utf8(&self.instance_text[usize::from(extended)]).unwrap_or_default()
    }

    /// The same text as shared bytes (a reference count, no copy).
    pub(crate) fn instance_json_bytes(&self, extended: bool) -> axum::body::Bytes {
        self.instance_text[usize::from(extended)].clone()
    }

    fn compute_str(&self, key: &[&str]) -> String {
        let mut node = &self.instance["compute"];
        for k in key {
            node = &node[*k];
        }
        node.as_str().unwrap_or_default().to_owned()
    }

    /// The reprovisioning `ovf-env.xml` (served once a `reprovision-available` trigger fired).
    pub(crate) fn reprovision_xml(&self) -> String {
        let key = self.instance["compute"]["publicKeys"][0]["keyData"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        render(
            OVF_ENV_XML,
            &[
                ("name", &xml_escape(&self.compute_str(&["name"]))),
                (
                    "admin_username",
                    &xml_escape(&self.compute_str(&["osProfile", "adminUsername"])),
                ),
                ("ssh_key", &xml_escape(&key)),
            ],
        )
    }
}

/// The goal state values in effect: defaults from `defaults/defaults.toml`, then overrides.
pub fn effective_goalstate(o: &GoalStateOverrides) -> GoalStateOverrides {
    let d = &*DEFAULT_GOALSTATE;
    GoalStateOverrides {
        incarnation: o.incarnation.clone().or_else(|| d.incarnation.clone()),
        container_id: o.container_id.clone().or_else(|| d.container_id.clone()),
        instance_id: o.instance_id.clone().or_else(|| d.instance_id.clone()),
        certificates: o.certificates.or(d.certificates),
        hosting_environment_config: o
            .hosting_environment_config
            .or(d.hosting_environment_config),
        shared_config: o.shared_config.or(d.shared_config),
        extensions_config: o.extensions_config.or(d.extensions_config),
    }
}

/// The IMDS values in effect, its rate limit included (for configuration dumps).
pub fn effective_imds(o: &ImdsOverrides) -> ImdsOverrides {
    let docs = Documents::new(&Scenario {
        imds: o.clone(),
        ..Scenario::default()
    });
    ImdsOverrides {
        vm_id: Some(docs.compute_str(&["vmId"])),
        pps_type: Some(docs.pps_type.clone()),
        name: Some(docs.compute_str(&["name"])),
        vm_size: Some(docs.compute_str(&["vmSize"])),
        admin_username: Some(docs.compute_str(&["osProfile", "adminUsername"])),
        instance_file: o.instance_file.clone(),
        rate_limit: Some(o.rate_limit.unwrap_or_default()),
        instance_document: None,
    }
}

/// Substitutes `{name}` placeholders (only the given names; other braces stay).
fn render(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = template.to_owned();
    for (name, value) in values {
        out = out.replace(&format!("{{{name}}}"), value);
    }
    out
}

pub(crate) fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// The addresses a running fake listens on (the binary's ready line).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Addresses {
    /// The wireserver listener.
    pub wireserver: Option<std::net::SocketAddr>,
    /// The IMDS listener.
    pub imds: Option<std::net::SocketAddr>,
    /// Only present when a HostGAPlugin listener runs (the ready line keeps its old shape).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostplugin: Option<std::net::SocketAddr>,
    /// The proxy listener.
    pub proxy: Option<std::net::SocketAddr>,
    /// The admin API listener.
    pub admin: Option<std::net::SocketAddr>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_defaults_parse() {
        let d: DefaultsFile = toml::from_str(DEFAULTS_TOML).expect("defaults.toml parses");
        assert_eq!(d.goalstate.incarnation.as_deref(), Some("1"));
        assert!(d.goalstate.container_id.is_some() && d.goalstate.instance_id.is_some());
        let v: Value = serde_json::from_str(INSTANCE_JSON).expect("instance.json parses");
        assert!(v["compute"]["vmId"].is_string());
        let v: Value = serde_json::from_str(IMDS_VERSIONS_JSON).expect("imds-versions.json parses");
        assert!(v["apiVersions"].is_array());
    }

    #[test]
    fn goalstate_renders_urls_on_the_agent_host() {
        let docs = Documents::new(&Scenario::default());
        let ids = docs.served_ids(0);
        let xml = docs.goalstate_xml(&ids, "http://168.63.129.16:80");
        assert!(xml.contains("<Incarnation>1</Incarnation>"));
        assert!(xml.contains(
            "http://168.63.129.16:80/machine/c6d5526c-5ac2-4200-b6e2-56f2b70c5ab2/MachineRole_IN_0?comp=config&amp;type=sharedConfig&amp;incarnation=1"
        ));
        assert!(xml.contains("comp=certificates&amp;incarnation=1"));
        // WALA refuses a goal state without these two (docs/protocol.md §3.1).
        assert!(xml.contains(
            "<HostingEnvironmentConfig>http://168.63.129.16:80/machine/c6d5526c-5ac2-4200-b6e2-56f2b70c5ab2/MachineRole_IN_0?comp=config&amp;type=hostingEnvironmentConfig&amp;incarnation=1</HostingEnvironmentConfig>"
        ));
        assert!(
            !xml.contains("ExtensionsConfig"),
            "optional, off by default"
        );
        let hosting = docs.hosting_environment_config_xml(&ids);
        assert!(hosting.contains(r#"<Incarnation number="1" instance="MachineRole_IN_0""#));
        assert!(
            hosting.contains(
                r#"<Role guid="{c6d5526c-5ac2-4200-b6e2-56f2b70c5ab2}" name="MachineRole""#
            )
        );
        assert!(hosting.contains(r#"<Deployment name="c6d5526c-5ac2-4200-b6e2-56f2b70c5ab2""#));
        assert_eq!(Documents::role_name("x.vector-vm"), "vector-vm");
        assert!(!xml.contains('{'), "no placeholder left: {xml}");
        assert_eq!(docs.served_ids(2).incarnation, "3");
    }

    #[test]
    fn cached_instance_text_is_the_document_with_overrides() {
        let mut scenario = Scenario::default();
        scenario.imds.name = Some("cached-vm".into());
        scenario.imds.pps_type = Some("Running".into());
        let docs = Documents::new(&scenario);
        for extended in [false, true] {
            assert_eq!(
                docs.instance_json_text(extended),
                docs.instance_json(extended).to_string()
            );
        }
        assert!(docs.instance_json_text(false).contains("\"cached-vm\""));
        assert!(!docs.instance_json_text(false).contains("ppsType"));
        assert!(
            docs.instance_json_text(true)
                .contains("\"ppsType\":\"Running\"")
        );
    }
}
