//! The profile format: loading, validation errors with their lines, templates and reactions.

use super::*;

const MINIMAL: &str = r#"
name = "demo"
description = "demo agent"

[commands]
ready = ["demo", "ready", "--url", "{wireserver_url}", ["--vm-id", "{vm_id}"]]

capabilities_placeholder = 1
"#;

fn load(text: &str) -> Result<AgentProfile, FileError> {
    AgentProfile::from_toml_str(text, Path::new("agents/demo.toml"))
}

fn valid() -> String {
    r#"name = "demo"
description = "demo agent"
capabilities = ["json", "kvp"]

[commands]
ready = ["demo", "ready", "--url", "{wireserver_url}", ["--vm-id", "{vm_id}"]]

[reactions]
retryable = [429, 503]
transport_errors = "retry"
status_403 = "fatal"

[[deviation]]
cases = "retry.*"
verdict = "non-strict"
reason = "known"
"#
    .to_owned()
}

#[test]
fn a_valid_profile_loads() {
    let p = load(&valid()).unwrap();
    assert_eq!(p.name, "demo");
    assert!(p.claims(Capability::Json) && !p.claims(Capability::Xml));
    assert_eq!(p.commands[&Action::Ready].line, Some(6));
    assert_eq!(p.deviation_for("retry.x.y").unwrap().reason, "known");
    assert!(p.deviation_for("wire.x").is_none());
    // An agent gives up at its budget unless its profile says it never does.
    assert!(p.reactions.gives_up);
    let daemon = valid().replace(
        "status_403 = \"fatal\"\n",
        "status_403 = \"fatal\"\ngives_up = false\n",
    );
    assert!(!load(&daemon).unwrap().reactions.gives_up);
}

#[test]
fn array_tables_are_named_from_one_on_their_own_line() {
    let second = "\n[[deviation]]\ncases = \"[\"\nverdict = \"non-strict\"\nreason = \"r\"\n";
    let err = load(&format!("{}{second}", valid())).unwrap_err();
    assert_eq!(
        (err.line, err.field.as_deref()),
        (Some(19), Some("deviation[2].cases")),
        "{err}"
    );
    let second = "\n[[deviation]]\ncases = \"x.*\"\nverdict = \"lenient\"\nreason = \"r\"\n";
    let err = load(&format!("{}{second}", valid())).unwrap_err();
    assert_eq!(
        (err.line, err.field.as_deref()),
        (Some(20), Some("deviation[2].verdict")),
        "{err}"
    );
    assert!(err.message.contains("unknown variant `lenient`"), "{err}");
    let second = "\n[[deviation]]\ncases = \"x.*\"\nverdict = \"non-strict\"\nreason = \"\"\n";
    let err = load(&format!("{}{second}", valid())).unwrap_err();
    assert_eq!(
        (err.line, err.field.as_deref()),
        (Some(21), Some("deviation[2].reason")),
        "{err}"
    );
    // An unknown key names its table.
    let err = load(&valid().replace(
        "status_403 = \"fatal\"",
        "status_403 = \"fatal\"\nretryable_statuses = [1]",
    ))
    .unwrap_err();
    assert_eq!(
        (err.line, err.field.as_deref()),
        (Some(12), Some("reactions")),
        "{err}"
    );
    assert!(
        err.message
            .starts_with("unknown field `retryable_statuses`"),
        "{err}"
    );
}

#[test]
fn a_profile_without_reactions_gets_the_recommended_policy() {
    let text = valid().replace(
        "[reactions]\nretryable = [429, 503]\ntransport_errors = \"retry\"\nstatus_403 = \"fatal\"\n",
        "",
    );
    assert!(!text.contains("[reactions]"));
    let p = load(&text).unwrap();
    assert_eq!(p.reactions, Reactions::recommended());
    // A [reactions] table given is still read whole.
    let p = load(&valid()).unwrap();
    assert_eq!(p.reactions.status_403, Forbidden::Fatal);
    assert!(load(&valid().replace("transport_errors = \"retry\"\n", "")).is_err());
}

#[test]
fn a_profile_file_is_named_after_its_agent_wherever_it_is_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("my-agent.toml");
    std::fs::write(&other, valid()).unwrap();
    // By path as well as by name: the name keys results, artifacts and snapshots.
    for err in [
        AgentProfile::load(&other).unwrap_err(),
        find_profile(dir.path(), "my-agent").unwrap_err(),
        find_profile(Path::new("/nonexistent"), &other.display().to_string()).unwrap_err(),
    ] {
        assert_eq!(err.field.as_deref(), Some("name"), "{err}");
        assert_eq!(err.line, Some(1), "{err}");
        assert!(err.to_string().contains("my-agent.toml"), "{err}");
        assert!(err.to_string().contains("\"demo\""), "{err}");
    }
    let same = dir.path().join("demo.toml");
    std::fs::write(&same, valid()).unwrap();
    assert_eq!(AgentProfile::load(&same).unwrap().name, "demo");
}

#[test]
fn unknown_fields_name_file_line_and_field() {
    let err = load(MINIMAL).unwrap_err().to_string();
    assert!(
        // The key is in [commands], which the message names as its table.
        err.starts_with(
            "agents/demo.toml:8:1: field `commands`: unknown field `capabilities_placeholder`"
        ),
        "{err}"
    );
}

#[test]
fn unset_placeholders_outside_groups_are_rejected() {
    let text = valid().replace(r#"["--vm-id", "{vm_id}"]"#, r#""--vm-id", "{vm_id}""#);
    let err = load(&text).unwrap_err();
    assert_eq!(err.line, Some(6));
    assert_eq!(err.field.as_deref(), Some("commands.ready"));
    assert!(err.message.contains("optional group"), "{err}");
}

/// `tries` counts from 1 and needs the first sleep it doubles and a time budget (what is judged
/// where nothing can be counted); `sequence_tries` needs `tries`;
/// an agent counting its tries gives up, so `gives_up = false` beside it is refused; each error
/// names its field and line.
#[test]
fn counted_tries_are_validated() {
    let with = |keys: &str| {
        load(&valid().replace(
            "status_403 = \"fatal\"\n",
            &format!("status_403 = \"fatal\"\n{keys}\n"),
        ))
    };
    let p =
        with("retry_interval_min = 1.0\nbudget = 65.0\ntries = 11\nsequence_tries = 6").unwrap();
    assert_eq!(
        p.reactions.tries,
        Some(crate::agent::Tries {
            per_request: 11,
            sequences: 6
        })
    );
    let once = with("retry_interval_min = 1.0\nbudget = 3.0\ntries = 3").unwrap();
    assert_eq!(once.reactions.tries.unwrap().sequences, 1);
    for (keys, field, says) in [
        (
            "retry_interval_min = 1.0\nbudget = 3.0\ntries = 0",
            "reactions.tries",
            "from 1 to 1000",
        ),
        (
            "budget = 3.0\ntries = 11",
            "reactions.tries",
            "needs `retry_interval_min`",
        ),
        (
            "retry_interval_min = 1.0\ntries = 11",
            "reactions.tries",
            "needs `budget`",
        ),
        (
            "sequence_tries = 6",
            "reactions.sequence_tries",
            "needs `tries`",
        ),
        (
            "retry_interval_min = 1.0\nbudget = 3.0\ntries = 2\nsequence_tries = 101",
            "reactions.sequence_tries",
            "from 1 to 100",
        ),
        (
            "retry_interval_min = 1.0\nbudget = 3.0\ntries = 2\ngives_up = false",
            "reactions.gives_up",
            "contradicts it",
        ),
    ] {
        let err = with(keys).unwrap_err();
        assert_eq!(err.field.as_deref(), Some(field), "{keys}: {err}");
        assert!(err.message.contains(says), "{keys}: {err}");
        assert!(err.line.is_some(), "{keys}: {err}");
    }
}

#[test]
fn retryable_403_is_rejected_with_a_hint() {
    let err = load(&valid().replace("[429, 503]", "[403]")).unwrap_err();
    assert_eq!(err.field.as_deref(), Some("reactions.retryable"));
    assert!(err.message.contains("status_403"), "{err}");
}

/// `honours_retry_after` lists statuses the agent retries, naming the file's line otherwise.
#[test]
fn honoured_retry_after_statuses_are_retried_error_statuses() {
    let with = |list: &str| {
        load(&valid().replace(
            "retryable = [429, 503]",
            &format!("retryable = [429, 503]\nhonours_retry_after = {list}"),
        ))
    };
    assert_eq!(
        with("[503]").unwrap().reactions.honours_retry_after,
        vec![503]
    );
    for (list, says) in [
        ("[500]", "500 is not retried"),
        ("[302]", "302 is not an error status"),
    ] {
        let err = with(list).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("reactions.honours_retry_after"));
        assert!(err.line.is_some() && err.message.contains(says), "{err}");
    }
}

/// `never_gives_up_on` lists statuses the agent retries, and only for an agent that otherwise
/// gives up on its own: `gives_up = false` says it already, `tries` contradicts it.
#[test]
fn statuses_never_given_up_on_are_retried_by_an_agent_that_gives_up() {
    let with = |extra: &str| {
        load(&valid().replace(
            "retryable = [429, 503]",
            &format!("retryable = [429, 503]\n{extra}"),
        ))
    };
    let p = with("never_gives_up_on = [503]").unwrap();
    assert_eq!(p.reactions.never_gives_up_on, vec![503]);
    for (extra, says) in [
        ("never_gives_up_on = [500]", "500 is not retried"),
        ("never_gives_up_on = [302]", "302 is not an error status"),
        (
            "never_gives_up_on = [503]\ngives_up = false",
            "already says it never gives up",
        ),
        (
            "never_gives_up_on = [503]\nretry_interval_min = 1.0\nbudget = 60.0\ntries = 3",
            "counts its tries",
        ),
    ] {
        let err = with(extra).unwrap_err();
        assert_eq!(
            err.field.as_deref(),
            Some("reactions.never_gives_up_on"),
            "{err}"
        );
        assert!(err.line.is_some() && err.message.contains(says), "{err}");
    }
}

fn daemon(extra: &str) -> String {
    valid().replace(
        "capabilities = [\"json\", \"kvp\"]",
        &format!("capabilities = [\"json\", \"kvp\"]\n{extra}"),
    )
}

#[test]
fn a_name_that_would_lead_out_of_a_folder_is_refused() {
    let err = load(&valid().replace("name = \"demo\"", "name = \"..\"")).unwrap_err();
    assert_eq!(err.field.as_deref(), Some("name"), "{err}");
}

#[test]
fn snapshot_options_load_and_bad_ones_name_their_field() {
    let text = format!(
        "{}\n[snapshot]\nheaders = [\"Content-Type\"]\nredact = [{{ field = \"host\" }}, {{ pattern = \"build-*\" }}]\n",
        valid()
    );
    let p = load(&text).unwrap();
    assert_eq!(p.snapshot.headers, Some(vec!["content-type".to_owned()]));
    assert_eq!(p.snapshot.redact.len(), 2);
    let bad = format!(
        "{}\n[snapshot]\nredact = [{{ field = \"a\", pattern = \"b\" }}]\n",
        valid()
    );
    let err = load(&bad).unwrap_err();
    assert_eq!(err.field.as_deref(), Some("snapshot.redact[1]"), "{err}");
    let bad = format!(
        "{}\n[snapshot]\nredact = [{{ pattern = \"{}\" }}]\n",
        valid(),
        "*".repeat(200)
    );
    let err = load(&bad).unwrap_err();
    assert_eq!(err.field.as_deref(), Some("snapshot.redact[1]"), "{err}");
}

#[test]
fn daemon_fields_load_and_default() {
    let p = load(&valid()).unwrap();
    assert_eq!((p.done, p.done_grace), (Done::Exit, DEFAULT_DONE_GRACE));
    assert_eq!(p.failure_description, FailureDescription::Encoded);
    assert!(p.sandbox_private_dirs.is_empty() && !p.in_progress_continues_to_ready);
    let text = daemon(
        "attach = \"sandbox\"\ndone = \"terminal-report\"\ndone_grace = 1.5\nfailure_description = \"exception-text\"\n[sandbox]\nprivate_dirs = [\"/var/log\"]\nstartup = 8.0\n",
    );
    let p = load(&text).unwrap();
    assert_eq!((p.done, p.done_grace), (Done::TerminalReport, 1.5));
    assert_eq!(p.failure_description, FailureDescription::ExceptionText);
    assert_eq!(p.sandbox_private_dirs, [PathBuf::from("/var/log")]);
    assert_eq!(p.sandbox_startup, 8.0);
    assert_eq!(p.health_report, HealthReporting::Sent);
    let p = load(&daemon("health_report = \"none\"\n")).unwrap();
    assert_eq!(p.health_report, HealthReporting::None);
}

#[test]
fn daemon_fields_are_validated_with_file_line_and_field() {
    for (extra, field, says) in [
        (
            "done = \"terminal-report\"\n",
            "done",
            "needs attach = \"sandbox\"",
        ),
        (
            "attach = \"sandbox\"\ndone_grace = 1.0\n",
            "done_grace",
            "only meaningful",
        ),
        (
            "attach = \"sandbox\"\ndone = \"terminal-report\"\ndone_grace = 90.0\n",
            "done_grace",
            "between 0 and 60",
        ),
        (
            "attach = \"sandbox\"\n[sandbox]\nprivate_dirs = [\"var/log\"]\n",
            "sandbox.private_dirs",
            "not an absolute folder",
        ),
        (
            "attach = \"sandbox\"\n[sandbox]\nprivate_dirs = [\"/var/../etc\"]\n",
            "sandbox.private_dirs",
            "not an absolute folder",
        ),
        (
            "[sandbox]\nprivate_dirs = [\"/var/log\"]\n",
            "sandbox.private_dirs",
            "only used",
        ),
        ("[sandbox]\nstartup = 3.0\n", "sandbox.startup", "only used"),
        (
            "attach = \"sandbox\"\nin_progress_continues_to_ready = true\n",
            "in_progress_continues_to_ready",
            "needs `commands.in-progress`",
        ),
    ] {
        let err = load(&daemon(extra)).unwrap_err();
        assert_eq!(err.field.as_deref(), Some(field), "{extra}: {err}");
        assert!(err.message.contains(says), "{extra}: {err}");
        assert!(err.line.is_some(), "{extra}: {err}");
    }
    let err = load(&daemon("failure_description = \"prose\"\n")).unwrap_err();
    assert!(err.to_string().contains("exception-text"), "{err}");
    let err = load(&daemon("health_report = \"quiet\"\n")).unwrap_err();
    assert!(err.to_string().contains("none"), "{err}");
    // No report to go on from.
    let text = daemon(
        "attach = \"sandbox\"\nhealth_report = \"none\"\nin_progress_continues_to_ready = true\n",
    )
    .replace("[commands]\n", "[commands]\nin-progress = [\"demo\"]\n");
    let err = load(&text).unwrap_err();
    assert_eq!(err.field.as_deref(), Some("health_report"), "{err}");
    assert!(
        err.message.contains("in_progress_continues_to_ready"),
        "{err}"
    );
}

#[test]
fn limits_load_default_and_name_their_field_when_out_of_range() {
    assert_eq!(load(&valid()).unwrap().limits, Limits::DEFAULT);
    let p = load(&format!(
        "{}\n[limits]\nprocesses = 64\nmemory_mib = 256\nfile_size_mib = 8\nopen_files = 128\n",
        valid()
    ))
    .unwrap();
    assert_eq!(
        p.limits,
        Limits {
            processes: 64,
            memory: 256 << 20,
            file_size: 8 << 20,
            open_files: 128,
        }
    );
    assert_eq!(
        load(&format!("{}\n[limits]\nmemory_mib = 512\n", valid()))
            .unwrap()
            .limits,
        Limits {
            memory: 512 << 20,
            ..Limits::DEFAULT
        }
    );
    for (line, field, says) in [
        (
            "processes = 4",
            "limits.processes",
            "from 16 to 32768, got 4",
        ),
        ("processes = -1", "limits.processes", "got -1"),
        (
            "memory_mib = 0",
            "limits.memory_mib",
            "from 64 to 1048576, got 0",
        ),
        (
            "file_size_mib = 9999999",
            "limits.file_size_mib",
            "got 9999999",
        ),
        ("open_files = 10", "limits.open_files", "from 64 to 1048576"),
    ] {
        let err = load(&format!("{}\n[limits]\n{line}\n", valid())).unwrap_err();
        assert_eq!(err.field.as_deref(), Some(field), "{line}: {err}");
        assert!(err.message.contains(says), "{line}: {err}");
        assert!(err.line.is_some(), "{line}: {err}");
    }
    let err = load(&format!("{}\n[limits]\nthreads = 9\n", valid())).unwrap_err();
    assert!(err.to_string().contains("threads"), "{err}");
    let err = load(&format!("{}\n[limits]\nprocesses = \"many\"\n", valid())).unwrap_err();
    assert!(err.to_string().contains("limits.processes"), "{err}");
}

#[test]
fn ad_hoc_agents_claim_everything_unless_told() {
    let here = Path::new(".");
    let p = AgentProfile::ad_hoc("python3 agent.py {action}", &[], here).unwrap();
    assert_eq!(p.commands.len(), 3);
    assert!(p.claims(Capability::InProgress));
    assert!(p.claims(Capability::Kvp));
    let p = AgentProfile::ad_hoc(
        "python3 agent.py {action}",
        &[Capability::Json, Capability::Failure],
        here,
    )
    .unwrap();
    assert!(p.claims(Capability::Json) && p.claims(Capability::Failure));
    assert!(!p.claims(Capability::Kvp) && !p.claims(Capability::Xml));
    assert!(
        AgentProfile::ad_hoc("a {nope}", &[], here)
            .unwrap_err()
            .contains("unknown placeholder")
    );
}

/// The ready command's words as written (no groups in these templates).
fn ready_words(p: &AgentProfile) -> Vec<String> {
    p.commands[&Action::Ready]
        .template
        .args
        .iter()
        .map(|a| match a {
            template::Arg::Word(w) => w.source().to_owned(),
            template::Arg::Group(_) => unreachable!(),
        })
        .collect()
}

#[test]
fn ad_hoc_paths_that_exist_here_are_made_absolute() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("my_agent.py"), "").unwrap();
    std::fs::create_dir(dir.path().join("bin")).unwrap();
    std::fs::write(dir.path().join("bin/agent"), "").unwrap();
    std::fs::write(dir.path().join("python3"), "").unwrap();
    let p = AgentProfile::ad_hoc(
        "python3 my_agent.py {action} --url {wireserver_url} missing.py --x=my_agent.py",
        &[],
        dir.path(),
    )
    .unwrap();
    let words: Vec<String> = ready_words(&p);
    let abs = dir.path().join("my_agent.py").display().to_string();
    // A bare program name stays a PATH lookup even when a file of that name is here.
    assert_eq!(
        words,
        [
            "python3",
            abs.as_str(),
            "{action}",
            "--url",
            "{wireserver_url}",
            "missing.py",
            "--x=my_agent.py"
        ]
    );
    // A folder, and an interpreter's module, are not paths to rewrite.
    std::fs::create_dir(dir.path().join("mypkg")).unwrap();
    std::fs::write(dir.path().join("code"), "").unwrap();
    let p =
        AgentProfile::ad_hoc("python3 -m mypkg mypkg -c code {action}", &[], dir.path()).unwrap();
    let args: Vec<String> = ready_words(&p);
    assert_eq!(
        args,
        ["python3", "-m", "mypkg", "mypkg", "-c", "code", "{action}"]
    );
    let p = AgentProfile::ad_hoc("bin/agent {action}", &[], dir.path()).unwrap();
    assert_eq!(
        p.commands[&Action::Ready].template.program().source(),
        dir.path().join("bin/agent").display().to_string()
    );
}

#[test]
fn limitations_are_read_and_bad_ones_named() {
    let base = r#"name = "l"
description = "l"
capabilities = ["json", "failure"]
[commands]
failure = ["true"]
[reactions]
retryable = [503]
transport_errors = "retry"
status_403 = "fatal"
"#;
    let with = |l: &str| {
        AgentProfile::from_toml_str(&format!("{base}[[limitation]]\n{l}"), Path::new("l.toml"))
    };
    let p = with("property = \"failure.*\"\ninput = \"non-bmp\"\nchecks = \"report.*\"\nverdict = \"unimplemented\"\nreason = \"UCS-2\"\n").unwrap();
    let l = &p.limitations[0];
    assert_eq!(
        (l.input, l.checks.as_str()),
        (InputClass::NonBmp, "report.*")
    );
    // The checks a limitation covers are said, never "all of them" by default.
    let e = with("property = \"failure.*\"\ninput = \"non-bmp\"\nverdict = \"unimplemented\"\nreason = \"UCS-2\"\n").unwrap_err();
    assert!(e.to_string().contains("checks"), "{e}");
    assert!(
        l.covers("failure.json", "report.description")
            && !l.covers("in-progress.json", "report.description")
    );
    assert!(InputClass::NonBmp.in_text("a😀") && !InputClass::NonBmp.in_text("aĀ"));
    assert!(InputClass::XmlInvalid.in_text("\u{1}") && !InputClass::XmlInvalid.in_text("\t\r\n"));
    let e = with("property = \"failure.*\"\ninput = \"non-bmp\"\nverdict = \"non-strict\"\nreason = \" \"\nchecks = \"*\"\n").unwrap_err();
    assert_eq!(
        (e.line, e.field.as_deref()),
        (Some(14), Some("limitation[1].reason")),
        "{e}"
    );
    let e = with("property = \"failure.*\"\ninput = \"emoji\"\nverdict = \"non-strict\"\nreason = \"r\"\nchecks = \"*\"\n").unwrap_err();
    assert!(e.to_string().contains("emoji") && e.line == Some(12), "{e}");
}

/// `[guest]`: only an agent claiming "guest", which only the sandbox can arrange; each declared
/// reason a text to find.
#[test]
fn a_guest_profile_loads_and_its_mistakes_name_their_field() {
    let guest = |attach: &str, extra: &str| {
        valid().replace(
            "capabilities = [\"json\", \"kvp\"]",
            &format!("attach = \"{attach}\"\ncapabilities = [\"json\", \"guest\"]\n{extra}"),
        )
    };
    let p = load(&guest(
        "sandbox",
        "[guest]\nonly = true\n[guest.reasons]\n\"guest.useradd.fails\" = \"user\"\n",
    ))
    .unwrap();
    assert!(p.claims(Capability::Guest) && p.guest.only);
    assert_eq!(p.guest.reasons["guest.useradd.fails"], "user");
    // Not claimed: no guest policy at all.
    assert_eq!(load(&valid()).unwrap().guest, GuestPolicy::default());

    let err = load(&guest("url", "")).unwrap_err();
    assert!(err.to_string().contains("only the sandbox"), "{err}");
    let err =
        load(&valid().replace("[reactions]", "[guest]\nonly = true\n\n[reactions]")).unwrap_err();
    assert_eq!(err.field.as_deref(), Some("guest"), "{err}");
    assert!(err.message.contains("claims \"guest\""), "{err}");
    let err = load(&guest(
        "sandbox",
        "[guest.reasons]\n\"guest.useradd.fails\" = \" \"\n",
    ))
    .unwrap_err();
    assert_eq!(
        err.field.as_deref(),
        Some("guest.reasons.guest.useradd.fails"),
        "{err}"
    );
    assert!(err.line.is_some(), "{err}");
}
