//! cloud-init's Azure datasource through its own boot (`cloud-init-25.1-boot`, Debian 13's
//! 25.1.4, and `cloud-init-26.2-boot`, unstable's 26.2), unmodified, in the guest of
//! `fake-wireserver sandbox --guest`: `init --local` reads the media's ovf-env.xml, takes the
//! platform's lease, queries IMDS and reports Ready or its own failure; `init` creates the
//! media's user afterwards; media it cannot parse it reports in its own words. A failing useradd
//! is never reported (Ready came first), which its profile declares with the source lines; the
//! host stays as it was.

use crate::walinuxagent_2_16::{
    cases, descriptions, guest_calls, host_files, run, useradds, verdict,
};
use wirecheck_e2e::require_root;

#[test]
fn cloud_init_25_1_provisions_the_guest_through_its_boot() {
    require_root();
    boots_the_guest("cloud-init-25.1-boot");
}

#[test]
fn cloud_init_26_2_provisions_the_guest_through_its_boot() {
    require_root();
    boots_the_guest("cloud-init-26.2-boot");
}

fn boots_the_guest(agent: &str) {
    let before = host_files();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results");
    let o = run(&[agent], "guest.*", None, &out);
    let all = cases(&out, agent);
    assert_eq!(all.len(), 37, "{all:?}\n{o:?}");
    // Ready before its users: the one declared deviation, everything else passes.
    for (id, v, reason) in &all {
        let declared = id.starts_with("guest.useradd.fails.report.");
        let declared = declared || id == "guest.useradd.fails.kvp.report";
        let want = if declared
            && (id.ends_with(".state")
                || id.ends_with(".description")
                || id.ends_with(".kvp.report"))
        {
            "non-strict"
        } else {
            "pass"
        };
        assert_eq!(v, want, "{id}: {reason}\n{all:?}");
    }
    let (_, why) = verdict(&all, "guest.useradd.fails.report.state");
    assert!(why.contains("got Ready"), "{why}");
    let artifacts = out.join("artifacts").join(agent);
    for (scenario, useradd) in [
        ("guest.provisions", Some(None)),
        ("guest.useradd.fails", Some(Some(9))),
        // Its ovf-env.xml is refused before any module runs.
        ("guest.ovf.no-hostname", None),
        ("guest.ovf.malformed", None),
    ] {
        let calls = guest_calls(&artifacts.join(scenario));
        // The media's user, in the groups of Debian's default user (the package's
        // cloud.cfg `system_info.default_user`, which the Azure datasource renames).
        let want: Vec<(Vec<String>, Option<u8>)> = useradd
            .map(|failed| {
                let args = [
                    "azureuser",
                    "--comment",
                    "Debian",
                    "--groups",
                    "adm,audio,cdrom,dialout,dip,floppy,plugdev,sudo,video",
                    "--shell",
                    "/bin/bash",
                    "-m",
                ];
                (args.map(String::from).to_vec(), failed)
            })
            .into_iter()
            .collect();
        assert_eq!(useradds(&calls), want, "{scenario}: {calls:?}");
    }
    // Its own words for the media it cannot use, as the platform got them.
    let said = descriptions(&artifacts.join("guest.ovf.no-hostname/journal.jsonl"));
    assert!(
        // Quoted as its csv writer quotes a field holding its quote character.
        said.iter().any(|d| d.starts_with(
            "result=error|'reason=unexpected metadata parsing ovf-env.xml: missing configuration for ''HostName'''|agent=Cloud-Init/"
        )),
        "{said:?}"
    );
    let broken = descriptions(&artifacts.join("guest.ovf.malformed/journal.jsonl"));
    assert!(
        broken
            .iter()
            .any(|d| d.starts_with("result=error|reason=error parsing ovf-env.xml: ")),
        "{broken:?}"
    );
    assert_eq!(before, host_files(), "the guest changed the host");
}
