//! `wirecheck merge OUT PART...` and the Markdown summary (`--summary FILE`, `wirecheck matrix
//! DIR`): parts of a `--partition` run put back together as the whole run would have written
//! them, and every kind of part that does not belong refused by name.

use crate::runner_support;

use std::path::Path;

use runner_support::{provision_report, repo, results, stderr, stdout, wirecheck};

/// The bundled reporter's wire.health.* cases (74 cases, under a second), split or not.
fn run_part(out: &Path, extra: &[&str]) -> std::process::Output {
    provision_report();
    wirecheck(&repo())
        .args(["run", "--quiet", "--cases", "wire.health.*", "--out"])
        .arg(out)
        .args(extra)
        .output()
        .unwrap()
}

fn case_ids(results: &serde_json::Value) -> Vec<(String, String, String)> {
    results["agents"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|a| {
            a["cases"].as_array().unwrap().iter().map(move |c| {
                (
                    a["agent"].as_str().unwrap().to_owned(),
                    c["id"].as_str().unwrap().to_owned(),
                    c["verdict"].as_str().unwrap().to_owned(),
                )
            })
        })
        .collect()
}

fn merge(out: &Path, parts: &[&Path]) -> std::process::Output {
    wirecheck(&repo())
        .arg("merge")
        .arg(out)
        .args(parts)
        .output()
        .unwrap()
}

#[test]
fn merged_parts_are_the_whole_run_and_strangers_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for k in 1..=3 {
        let part = format!("{k}/3");
        let out = run_part(
            &d.join(format!("p{k}")),
            &["--partition", &part, "--run-id", "77"],
        );
        assert_eq!(out.status.code(), Some(0), "part {k}: {}", stderr(&out));
    }
    let out = run_part(&d.join("whole"), &["--run-id", "77"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let part1 = results(&d.join("p1"));
    assert_eq!(
        part1["run"]["partition"],
        serde_json::json!({"k": 1, "n": 3})
    );
    assert_eq!(part1["run"]["id"], "77");

    // Given in any order: the same cases, in the same order, with the same verdicts, as the
    // whole run; every file regenerated; every part's artifacts beside them.
    let merged = d.join("merged");
    let summary = d.join("summary.md");
    let out = wirecheck(&repo())
        .arg("merge")
        .arg(&merged)
        .args([
            d.join("p3"),
            d.join("p1").join("results.json"),
            d.join("p2"),
        ])
        .arg("--summary")
        .arg(&summary)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("74 pass"), "{}", stdout(&out));
    let whole = results(&d.join("whole"));
    let got = results(&merged);
    assert_eq!(case_ids(&got), case_ids(&whole));
    assert_eq!(got["run"]["plan"], whole["run"]["plan"]);
    assert_eq!(got["run"]["partition"], serde_json::json!({"k": 1, "n": 1}));
    // The build that wrote the parts, commit included, is the merged file's.
    assert_eq!(got["wirecheck_commit"], part1["wirecheck_commit"]);
    assert_eq!(
        got["wirecheck_commit"],
        conformance::build_info::COMMIT,
        "{got:#}"
    );
    let junit = std::fs::read_to_string(merged.join("junit.xml")).unwrap();
    assert!(junit.contains("tests=\"74\""), "{junit}");
    let html = std::fs::read_to_string(merged.join("report.html")).unwrap();
    // The scenario as a heading, its checks as rows (report.html's layout).
    assert!(html.contains("wire.health.xml.ready") && html.contains("report.state"));
    for a in got["agents"][0]["cases"].as_array().unwrap() {
        let folder = merged.join(a["artifacts"].as_str().unwrap());
        assert!(
            folder.join("journal.jsonl").is_file(),
            "{}",
            folder.display()
        );
    }
    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(md.starts_with("## wirecheck: ✅ passed"), "{md}");
    assert!(md.contains("| `wire` | 74 pass |"), "{md}");

    // Refusals: exit 2, naming the part, nothing written.
    let refused = |parts: &[&Path], expect: &[&str]| {
        let out_dir = d.join("refused");
        let out = merge(&out_dir, parts);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{parts:?}: {err}");
        for e in expect {
            assert!(err.contains(e), "{parts:?}: expected {e:?} in {err}");
        }
        assert!(!out_dir.join("results.json").exists());
    };
    let (p1, p2, p3) = (d.join("p1"), d.join("p2"), d.join("p3"));
    refused(&[&p1, &p3], &["partition 2/3 of 3 is missing"]);
    refused(&[&p1, &p2, &p3, &p2], &["both partition 2/3", "p2"]);
    refused(
        &[&p1, &p2, &p3, &d.join("whole")],
        &["whole", "split the same way"],
    );
    // Another run of the same plan (another --run-id), another plan (other cases).
    let out = run_part(&d.join("q2"), &["--partition", "2/3", "--run-id", "78"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    refused(
        &[&p1, &d.join("q2"), &p3],
        &["q2", "run id \"78\"", "\"77\""],
    );
    let out = wirecheck(&repo())
        .args([
            "run",
            "--quiet",
            "--cases",
            "wire.health.json.*",
            "--partition",
            "2/3",
        ])
        .args(["--run-id", "77", "--out"])
        .arg(d.join("r2"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    refused(&[&p1, &d.join("r2"), &p3], &["r2", "another run"]);
    refused(&[&p1, &p2, &p3, &merged], &["merged"]);
    refused(&[&merged, &p1], &["split the same way"]);
    // The output folder is one of the parts.
    let out = merge(&p1, &[&p1, &p2, &p3]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("also the output folder"),
        "{}",
        stderr(&out)
    );

    // A part that is not a regular file (a FIFO would block a plain read) or not a results
    // folder at all.
    let fifo = d.join("fifo");
    std::fs::create_dir_all(&fifo).unwrap();
    let status = std::process::Command::new("mkfifo")
        .arg(fifo.join("results.json"))
        .status()
        .unwrap();
    assert!(status.success());
    refused(&[&p1, &fifo, &p3], &["fifo", "FIFO"]);
    refused(&[&p1, &d.join("nothing-here"), &p3], &["nothing-here"]);

    // Edited parts: another version, no run information, a case lost, a case in two parts.
    let edited = |name: &str, edit: &dyn Fn(&mut serde_json::Value)| {
        let mut value = results(&p2);
        edit(&mut value);
        let folder = d.join(name);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("results.json"), value.to_string()).unwrap();
        folder
    };
    let old = edited("old", &|v| v["wirecheck_version"] = "0.0.9".into());
    refused(&[&p1, &old, &p3], &["old", "wirecheck 0.0.9"]);
    // The same version built from another commit is another build; so is a file without one.
    let rebuilt = edited("rebuilt", &|v| v["wirecheck_commit"] = "0123abc".into());
    refused(&[&p1, &rebuilt, &p3], &["rebuilt", "(commit 0123abc)"]);
    let uncommitted = edited("uncommitted", &|v| {
        v.as_object_mut().unwrap().remove("wirecheck_commit");
    });
    let bare_version = format!("written by wirecheck {},", conformance::build_info::VERSION);
    refused(&[&p1, &uncommitted, &p3], &["uncommitted", &bare_version]);
    let bare = edited("bare", &|v| {
        v.as_object_mut().unwrap().remove("run");
    });
    refused(
        &[&p1, &bare, &p3],
        &["bare", "older than `wirecheck merge`"],
    );
    let short = edited("short", &|v| {
        v["agents"][0]["cases"].as_array_mut().unwrap().pop();
    });
    refused(&[&p1, &short, &p3], &["planned 74", "73 cases", "short"]);
    let p1_case = results(&p1)["agents"][0]["cases"][0].clone();
    let twice = edited("twice", &|v| {
        v["agents"][0]["cases"].as_array_mut().unwrap()[0] = p1_case.clone();
    });
    refused(
        &[&p1, &twice, &p3],
        &["twice", "is also in", &p1.display().to_string()],
    );
}

#[test]
fn the_summary_groups_failures_by_check_and_message_and_matrix_reads_a_folder() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let summary = dir.path().join("summary.md");
    std::fs::write(&summary, "earlier step\n").unwrap();
    // An agent that exits without reporting anything: every case fails the same few ways.
    let out = wirecheck(&repo())
        .args([
            "run",
            "--quiet",
            "--cases",
            "wire.health.*",
            "--agent-cmd",
            "true",
            "--out",
        ])
        .arg(&out_dir)
        .arg("--summary")
        .arg(&summary)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let md = std::fs::read_to_string(&summary).unwrap();
    // Appended, as $GITHUB_STEP_SUMMARY is meant to be.
    assert!(
        md.starts_with("earlier step\n## wirecheck: ❌ failed"),
        "{md}"
    );
    assert!(md.contains("### Problems: "), "{md}");
    let results = results(&out_dir);
    let fails: Vec<&serde_json::Value> = results["agents"][0]["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["verdict"] == "fail")
        .collect();
    assert!(!fails.is_empty());
    // The biggest group is listed first with its count; each failing case is under a group.
    let first_group = md
        .lines()
        .find(|l| l.starts_with("- **fail**"))
        .expect("a group line");
    let count: usize = first_group
        .split(" × ")
        .nth(1)
        .and_then(|t| t.split(':').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("{first_group}"));
    let groups: Vec<usize> = md
        .lines()
        .filter(|l| l.starts_with("- **fail**"))
        .filter_map(|l| {
            l.split(" × ")
                .nth(1)?
                .split(':')
                .next()?
                .trim()
                .parse()
                .ok()
        })
        .collect();
    assert_eq!(groups.iter().sum::<usize>(), fails.len(), "{md}");
    assert_eq!(count, *groups.iter().max().unwrap(), "{md}");

    // `wirecheck matrix` of the folder is the matrix of its results.json.
    let of_folder = wirecheck(&repo())
        .arg("matrix")
        .arg(&out_dir)
        .output()
        .unwrap();
    let of_file = wirecheck(&repo())
        .arg("matrix")
        .arg(out_dir.join("results.json"))
        .output()
        .unwrap();
    assert_eq!(of_folder.status.code(), Some(0), "{}", stderr(&of_folder));
    assert_eq!(stdout(&of_folder), stdout(&of_file));
    assert!(stdout(&of_folder).contains("| `wire` |"));
    assert!(
        md.contains(&stdout(&of_file)),
        "the summary holds the matrix"
    );
    let empty = wirecheck(&repo())
        .arg("matrix")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(empty.status.code(), Some(2));
    assert!(
        stderr(&empty).contains("without a results.json"),
        "{}",
        stderr(&empty)
    );
}

#[test]
fn boolean_variables_take_1_and_0_and_refuse_other_words_by_name() {
    let dir = tempfile::tempdir().unwrap();
    // Every boolean flag's variable reads the same way; `kvp dump`'s WIRECHECK_JSON shows it
    // cheaply: 1 prints JSON, 0 text.
    let pool = dir.path().join("pool");
    std::fs::write(&pool, b"").unwrap();
    let dump = |value: &str| {
        wirecheck(&repo())
            .args(["kvp", "dump"])
            .arg(&pool)
            .env("WIRECHECK_JSON", value)
            .output()
            .unwrap()
    };
    let json = dump("1");
    assert!(
        stdout(&json).trim_start().starts_with('{'),
        "{}",
        stdout(&json)
    );
    let text = dump("0");
    assert!(
        !stdout(&text).trim_start().starts_with('{'),
        "{}",
        stdout(&text)
    );
    assert_eq!(stdout(&dump("true")), stdout(&json));
    assert_eq!(stdout(&dump("false")), stdout(&text));
    // Empty (a CI file's `WIRECHECK_JSON:` with nothing after it) is false, not an error.
    let empty = dump("");
    assert_eq!(empty.status.code(), Some(0), "{}", stderr(&empty));
    assert_eq!(stdout(&empty), stdout(&text));
    assert_eq!(stdout(&dump("ON")), stdout(&json));
    let bad = dump("maybe");
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("maybe"), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("1/0"), "{}", stderr(&bad));
}

/// A merge ends as the run would have: parts that were interrupted, or whose agent was never
/// judged, are not a green merge (exit 130 / 2, and the summary says so, not "passed"); a
/// corrupt part is an error, not a panic; a part's artifacts behind a link are not followed.
#[test]
fn a_merge_of_unjudged_or_hostile_parts_is_never_green() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let whole = d.join("whole");
    let out = run_part(&whole, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let variant = |name: &str, edit: &dyn Fn(&mut serde_json::Value)| {
        let part = d.join(name);
        std::fs::create_dir_all(&part).unwrap();
        let mut r = results(&whole);
        edit(&mut r);
        std::fs::write(part.join("results.json"), r.to_string()).unwrap();
        part
    };
    let merged = |parts: &[&Path], summary: &Path| {
        let out = wirecheck(&repo())
            .arg("merge")
            .arg(d.join(format!(
                "m-{}",
                summary.file_name().unwrap().to_string_lossy()
            )))
            .args(parts)
            .arg("--summary")
            .arg(summary)
            .output()
            .unwrap();
        (out, std::fs::read_to_string(summary).unwrap_or_default())
    };

    let interrupted = variant("interrupted", &|r| r["interrupted"] = "SIGTERM".into());
    let (out, md) = merged(&[&interrupted], &d.join("interrupted.md"));
    assert_eq!(out.status.code(), Some(143), "{}", stderr(&out));
    assert!(md.contains("interrupted") && !md.contains("passed"), "{md}");

    let skipped = variant("skipped", &|r| {
        for c in r["agents"][0]["cases"].as_array_mut().unwrap() {
            c["verdict"] = "skipped".into();
            c["reason"] = "the agent does not claim json".into();
        }
    });
    let (out, md) = merged(&[&skipped], &d.join("skipped.md"));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("nothing about it was judged"),
        "{}",
        stderr(&out)
    );
    assert!(md.contains("not judged") && !md.contains("passed"), "{md}");

    let never = variant("never", &|r| {
        r["never_started"] = serde_json::json!([
            {"agent": "provision-report", "message": "agent provision-report never got going"}
        ]);
    });
    let (out, md) = merged(&[&never], &d.join("never.md"));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(md.contains("never got going"), "{md}");

    // Corrupt numbers and partitions: errors naming the part, never a panic (exit 101).
    let huge = variant("huge", &|r| r["duration_ms"] = u64::MAX.into());
    let (out, _) = merged(&[&huge], &d.join("huge.md"));
    assert_ne!(out.status.code(), Some(101), "{}", stderr(&out));
    let zero = variant("zero", &|r| {
        r["run"]["partition"] = serde_json::json!({"k": 0, "n": 0});
    });
    let (out, _) = merged(&[&zero], &d.join("zero.md"));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("0/0 is not a partition"),
        "{}",
        stderr(&out)
    );

    // A part whose artifacts folder is a link to elsewhere: refused, nothing copied.
    let secret = d.join("secret");
    std::fs::create_dir_all(&secret).unwrap();
    std::fs::write(secret.join("key"), "s3cr3t").unwrap();
    let linked = variant("linked", &|_| {});
    std::os::unix::fs::symlink(&secret, linked.join("artifacts")).unwrap();
    let out = merge(&d.join("m-linked"), &[&linked]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("symbolic link"), "{}", stderr(&out));
    assert!(!d.join("m-linked/artifacts/key").exists());
}

/// Two different agents behind one name (two `--agent-cmd` commands) are not one run, though
/// their case ids are the same.
#[test]
fn parts_of_two_different_agents_of_one_name_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let part = |name: &str, cmd: &str, k: &str| {
        wirecheck(&repo())
            .args(["run", "--quiet", "--cases", "wire.health.json.*"])
            .args(["--agent-cmd", cmd, "--partition", k, "--out"])
            .arg(d.join(name))
            .output()
            .unwrap()
    };
    part("a", "true {action}", "1/2");
    part("b", "false {action}", "2/2");
    assert!(d.join("a/results.json").is_file() && d.join("b/results.json").is_file());
    let out = merge(&d.join("m"), &[&d.join("a"), &d.join("b")]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("another run"), "{}", stderr(&out));
}

/// The finding: a crafted part (its results.json) put an off-site link into the merged
/// report.html (`\\evil.example` is a link to another host once a browser reads it).
#[test]
fn a_crafted_merge_part_puts_no_off_site_link_into_report_html() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let whole = d.join("whole");
    let out = run_part(&whole, &["--cases", "wire.health.json.ready.*"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let crafted = d.join("crafted");
    std::fs::create_dir_all(&crafted).unwrap();
    let mut r = results(&whole);
    for (i, c) in r["agents"][0]["cases"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .enumerate()
    {
        c["artifacts"] = [
            "\\\\evil.example/x",
            " //evil.example/x",
            "javascript:alert(1)",
        ][i % 3]
            .into();
    }
    std::fs::write(crafted.join("results.json"), r.to_string()).unwrap();
    let out = merge(&d.join("merged"), &[&crafted]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let page = std::fs::read_to_string(d.join("merged/report.html")).unwrap();
    let hrefs: Vec<&str> = page
        .split("href=\"")
        .skip(1)
        .map(|rest| &rest[..rest.find('"').unwrap()])
        .collect();
    assert!(!hrefs.is_empty());
    for href in hrefs {
        assert!(href.starts_with('#'), "off the page: {href:?}");
    }
    // Shown as text instead, escaped.
    assert!(page.contains("artifacts <code>\\\\evil.example/x</code>"));
}
