//! `fake-wireserver sandbox --guest FILE`: the simulated VM (needs root, as the sandbox does).
//! What the agent sees (DMI, media, NIC, private folders), what the stand-in tools record and
//! do, and that nothing of the host changes.

use std::path::Path;
use std::process::{Command, Output};

use fake_wireserver::guest::{Guest, Tool, ToolCall};
use wirecheck_test_support::sandbox::{describe, summary};

const FAKE: &str = env!("CARGO_BIN_EXE_fake-wireserver");

fn sandbox(out: &Path, extra: &[&str], command: &[&str]) -> Output {
    wirecheck_test_support::sandbox::run(Path::new(FAKE), out, extra, command)
}

/// What a guest must leave as it was on the host.
#[derive(Debug, PartialEq, Eq)]
struct HostFiles {
    passwd: Vec<u8>,
    group: Vec<u8>,
    shadow: Vec<u8>,
    hostname: String,
    home: Vec<String>,
    root: Vec<String>,
    mnt: Vec<String>,
    dev_sr0: bool,
}

fn list(dir: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

fn host_files() -> HostFiles {
    let read = |p: &str| std::fs::read(p).unwrap_or_default();
    let hostname = Command::new("hostname").output().unwrap();
    HostFiles {
        passwd: read("/etc/passwd"),
        group: read("/etc/group"),
        shadow: read("/etc/shadow"),
        hostname: String::from_utf8_lossy(&hostname.stdout).into_owned(),
        home: list("/home"),
        root: list("/root"),
        mnt: list("/mnt"),
        dev_sr0: Path::new("/dev/sr0").exists(),
    }
}

fn calls(out: &Path) -> Vec<ToolCall> {
    std::fs::read_to_string(out.join("guest-calls.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

const OVF: &str = "<Environment><UserName>azureuser</UserName></Environment>\n";

fn write_guest(dir: &Path, guest: &Guest) -> String {
    let path = dir.join("guest.toml");
    std::fs::write(&path, guest.to_toml()).unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn a_failing_useradd_is_recorded_and_fails_as_scripted_and_the_host_is_untouched() {
    let before = host_files();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let guest = Guest::from_toml_str(&format!(
        "vm_id = \"12345678-9abc-def0-1122-334455667788\"\n\
         generation = 1\n\
         ovf_env = {OVF:?}\n\
         [fail.useradd]\nexit = 9\nstderr = \"useradd: user 'azureuser' already exists\\n\"\n"
    ))
    .unwrap();
    let guest_file = write_guest(dir.path(), &guest);
    let script = r#"
        cat /sys/class/dmi/id/product_uuid /sys/class/dmi/id/chassis_asset_tag
        test -d /sys/firmware/efi && echo efi || echo no-efi
        mount | grep -c '^/dev/sr0 on /mnt/cdrom/secure '
        cat /mnt/cdrom/secure/ovf-env.xml
        ip -o -4 addr show dev eth0 | awk '{print "eth0 " $4}'
        useradd -m -G sudo azureuser 2>&1; echo "useradd=$?"
        hostname guest-vm; echo "hostname=$(hostname)"
        echo 'litter:x:4242:4242::/home/litter:/bin/sh' >> /etc/passwd
        touch /home/litter /root/litter /mnt/litter
    "#;
    let o = sandbox(&out, &["--guest", &guest_file], &["bash", "-c", script]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    for want in [
        // Gen1: the first three fields byte-swapped against the vmId.
        "78563412-bc9a-f0de-1122-334455667788",
        "7783-7084-3265-9085-8269-3286-77",
        "no-efi",
        "1",
        "<Environment><UserName>azureuser</UserName></Environment>",
        "eth0 10.0.0.4/24",
        "useradd=9",
        "useradd: user 'azureuser' already exists",
        "hostname=guest-vm",
    ] {
        assert!(lines.contains(&want), "{want:?} missing:\n{}", describe(&o));
    }
    let calls = calls(&out);
    assert_eq!(
        calls
            .iter()
            .map(|c| (c.tool, c.args.join(" "), c.failed_with))
            .collect::<Vec<_>>(),
        [
            (Tool::Useradd, "-m -G sudo azureuser".to_owned(), Some(9)),
            (Tool::Hostname, "guest-vm".to_owned(), None),
            (Tool::Hostname, String::new(), None),
        ]
    );
    assert_eq!(summary(&out)["guest_calls"], 3);
    assert_eq!(before, host_files(), "the guest changed the host");
}

#[test]
fn a_real_useradd_creates_the_user_in_the_guest_only_and_gen2_boots_uefi() {
    let before = host_files();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let guest =
        Guest::from_toml_str("vm_id = \"12345678-9abc-def0-1122-334455667788\"\ngeneration = 2\n")
            .unwrap();
    let guest_file = write_guest(dir.path(), &guest);
    let script = r#"
        set -e
        cat /sys/class/dmi/id/product_uuid
        test -d /sys/firmware/efi && echo efi
        test -e /dev/sr0 || echo no-media
        useradd -m -s /bin/bash azureuser
        getent passwd azureuser | cut -d: -f1,6
        test -d /home/azureuser && echo home-made
    "#;
    let o = sandbox(&out, &["--guest", &guest_file], &["bash", "-c", script]);
    assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "12345678-9abc-def0-1122-334455667788",
            "efi",
            "no-media",
            "azureuser:/home/azureuser",
            "home-made"
        ],
        "{}",
        describe(&o)
    );
    let calls = calls(&out);
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].args, ["-m", "-s", "/bin/bash", "azureuser"]);
    assert_eq!(calls[0].failed_with, None);
    assert_eq!(before, host_files(), "the guest changed the host");
}

#[test]
fn a_bad_guest_file_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("guest.toml");
    std::fs::write(&bad, "[fail.useradd]\nexit = 0\n").unwrap();
    let bad = bad.to_str().unwrap();
    let marker = dir.path().join("ran");
    let touch = format!("touch {}", marker.display());
    let o = sandbox(
        &dir.path().join("out"),
        &["--guest", bad],
        &["bash", "-c", &touch],
    );
    assert_eq!(o.status.code(), Some(2), "{}", describe(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("guest.toml") && stderr.contains("fail.useradd.exit"),
        "{stderr}"
    );
    assert!(!marker.exists());
}

/// The guest's root is nobody on the host: what it may do to the guest (its /etc, its users'
/// homes, its host name) it may not do to the host, whose files root owns.
#[test]
fn the_guests_root_is_nobody_on_the_host() {
    let before = host_files();
    let dir = tempfile::tempdir().unwrap();
    let guest_file = write_guest(dir.path(), &Guest::default());
    let script = r#"
        id -u
        echo x >> /etc/passwd && echo guest-etc-written
        touch /usr/wirecheck-guest-litter 2>/dev/null || echo host-usr-refused
        echo 1 > /proc/sys/vm/drop_caches 2>/dev/null || echo host-sysctl-refused
        : >> /usr/sbin/useradd 2>/dev/null || echo stand-in-refused
        hostname guest-vm && hostname
    "#;
    for extra in [
        &["--guest", &guest_file][..],
        &["--guest", &guest_file, "--unprivileged"],
    ] {
        let o = sandbox(&dir.path().join("out"), extra, &["bash", "-c", script]);
        assert_eq!(o.status.code(), Some(0), "{}", describe(&o));
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert_eq!(
            stdout.lines().collect::<Vec<_>>(),
            [
                "0",
                "guest-etc-written",
                "host-usr-refused",
                "host-sysctl-refused",
                "stand-in-refused",
                "guest-vm"
            ],
            "{}",
            describe(&o)
        );
    }
    assert!(!Path::new("/usr/wirecheck-guest-litter").exists());
    assert_eq!(before, host_files(), "the guest changed the host");
}
