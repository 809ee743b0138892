//! The admin API is not a file server (issue 13): scenario files load only regular, bounded files
//! from an allowed folder; the admin listener wants its token and refuses what a browser sends.
//! Each test is named after the finding it closes.

// The fake's own test helpers (one copy for its suites and these).
use crate::common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fake_wireserver::files::MAX_FILE_BYTES;
use fake_wireserver::{Fake, FakeConfig};

use common::{Outcome, Response, exchange, goalstate_get, request, response};

const T: Duration = Duration::from_secs(10);

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

type Headers = Vec<(String, String)>;

/// What an admin client sends: the listener's Host, the token, TOML.
fn client_headers(admin: SocketAddr, token: &str) -> Headers {
    vec![
        ("Host".into(), admin.to_string()),
        ("Authorization".into(), format!("Bearer {token}")),
        ("Content-Type".into(), "application/toml".into()),
    ]
}

/// One request to the admin listener; it must be answered.
async fn send(
    admin: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(String, String)],
    body: &str,
) -> Response {
    response(exchange(admin, &request(method, target, headers, body), T).await)
}

async fn post_scenario(fake: &Fake, target: &str, body: &str) -> Response {
    let admin = fake.admin_addr().unwrap();
    send(
        admin,
        "POST",
        target,
        &client_headers(admin, fake.admin_token().unwrap()),
        body,
    )
    .await
}

fn goalstate_from_file(file: &str) -> String {
    format!(
        "[[endpoint]]\nid = \"wireserver.goalstate\"\nend = \"repeat-last\"\n[[endpoint.step]]\nkind = \"respond\"\nstatus = 200\nbody_file = \"{file}\"\n"
    )
}

async fn admin_fake(config: FakeConfig) -> Fake {
    Fake::start(config.admin(loopback())).await.unwrap()
}

async fn served_goalstate(fake: &Fake) -> Response {
    response(exchange(fake.wireserver_addr().unwrap(), &goalstate_get(), T).await)
}

/// The default goal state is still what the wireserver serves, and no plan was loaded.
async fn assert_nothing_loaded(fake: &Fake) {
    assert!(
        fake.scenario().endpoints.is_empty(),
        "a scenario was loaded"
    );
    let gs = served_goalstate(fake).await;
    assert_eq!(gs.status, 200);
    assert!(gs.text().contains("<GoalState"), "{}", gs.text());
}

// ---------------------------------------------------------------------------------------------
// Admin file read

#[tokio::test]
async fn admin_file_read_of_etc_shadow_is_refused_with_400_and_nothing_is_served() {
    let fake = admin_fake(FakeConfig::default()).await;
    let scenario = goalstate_from_file("/etc/shadow");

    // No origin and no --allow-files: no file at all.
    let r = post_scenario(&fake, "/__admin/scenario", &scenario).await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(
        r.text().trim(),
        "<admin>:7:13: endpoint[1].step[1].body_file: cannot read \"/etc/shadow\": no folder \
         allows files (a scenario posted to the admin API needs ?origin=PATH, or the fake an \
         --allow-files DIR); expected an inline body"
    );
    assert_nothing_loaded(&fake).await;

    // An origin makes its folder the allowed one; /etc/shadow is still outside it.
    let dir = tempfile::tempdir().unwrap();
    let origin = dir.path().join("s.toml");
    let r = post_scenario(
        &fake,
        &format!("/__admin/scenario?origin={}", origin.display()),
        &scenario,
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.text());
    let text = r.text();
    assert!(
        text.starts_with(&format!(
            "{}:7:13: endpoint[1].step[1].body_file: cannot read \"/etc/shadow\": it resolves to /etc/shadow, outside the allowed folders",
            origin.display()
        )),
        "{text}"
    );
    assert_nothing_loaded(&fake).await;
    if let Ok(shadow) = std::fs::read_to_string("/etc/shadow") {
        let gs = served_goalstate(&fake).await.text();
        assert!(
            shadow.lines().all(|l| l.is_empty() || !gs.contains(l)),
            "the shadow file was served"
        );
    }
}

/// `dir/secret.txt` (outside the scenario folder) and `dir/scenarios/` (the folder).
fn escape_layout() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("secret.txt"), "SECRET-OUTSIDE").unwrap();
    let folder = dir.path().join("scenarios");
    std::fs::create_dir(&folder).unwrap();
    std::fs::write(folder.join("inside.xml"), "<GoalState>INSIDE</GoalState>").unwrap();
    (dir, folder)
}

#[tokio::test]
async fn admin_file_read_dotdot_escape_is_refused() {
    let (_dir, folder) = escape_layout();
    let fake = admin_fake(FakeConfig::default()).await;
    let target = format!(
        "/__admin/scenario?origin={}",
        folder.join("s.toml").display()
    );
    for path in ["../secret.txt", "./../scenarios/../secret.txt"] {
        let r = post_scenario(&fake, &target, &goalstate_from_file(path)).await;
        assert_eq!(r.status, 400, "{path}: {}", r.text());
        assert!(
            r.text().contains(&format!(
                "endpoint[1].step[1].body_file: cannot read {path:?}: it resolves to {}, outside the allowed folders",
                folder.parent().unwrap().canonicalize().unwrap().join("secret.txt").display()
            )),
            "{}",
            r.text()
        );
        assert_nothing_loaded(&fake).await;
    }
    // The folder itself is allowed (the refusals are not the API refusing every file).
    let r = post_scenario(&fake, &target, &goalstate_from_file("inside.xml")).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        served_goalstate(&fake).await.text(),
        "<GoalState>INSIDE</GoalState>"
    );
}

#[tokio::test]
async fn admin_file_read_symlink_escape_is_refused() {
    let (dir, folder) = escape_layout();
    std::os::unix::fs::symlink(dir.path().join("secret.txt"), folder.join("link.xml")).unwrap();
    std::os::unix::fs::symlink(dir.path(), folder.join("up")).unwrap();
    let fake = admin_fake(FakeConfig::default()).await;
    let target = format!(
        "/__admin/scenario?origin={}",
        folder.join("s.toml").display()
    );
    for path in ["link.xml", "up/secret.txt"] {
        let r = post_scenario(&fake, &target, &goalstate_from_file(path)).await;
        assert_eq!(r.status, 400, "{path}: {}", r.text());
        assert!(
            r.text().contains("outside the allowed folders"),
            "{path}: {}",
            r.text()
        );
        assert_nothing_loaded(&fake).await;
    }
    // A symlink that stays inside the folder is fine.
    std::os::unix::fs::symlink(folder.join("inside.xml"), folder.join("alias.xml")).unwrap();
    let r = post_scenario(&fake, &target, &goalstate_from_file("alias.xml")).await;
    assert_eq!(r.status, 200, "{}", r.text());
}

#[test]
fn scenario_file_symlink_and_dotdot_escapes_are_refused_when_loaded_from_a_file() {
    let (dir, folder) = escape_layout();
    std::os::unix::fs::symlink(dir.path().join("secret.txt"), folder.join("link.xml")).unwrap();
    for path in ["../secret.txt", "link.xml", "/etc/passwd"] {
        let file = folder.join("s.toml");
        std::fs::write(&file, goalstate_from_file(path)).unwrap();
        let e = fake_wireserver::Scenario::from_file(&file).unwrap_err();
        assert_eq!(e.field(), Some("endpoint[1].step[1].body_file"), "{e}");
        assert_eq!(e.line(), Some(7), "{e}");
        assert!(e.to_string().contains("outside the allowed folders"), "{e}");
    }
    // --allow-files adds a folder.
    let file = folder.join("s.toml");
    std::fs::write(&file, goalstate_from_file("../secret.txt")).unwrap();
    let s =
        fake_wireserver::Scenario::from_file_allowing(&file, &[dir.path().to_path_buf()]).unwrap();
    assert_eq!(s.endpoints.len(), 1);
}

#[tokio::test]
async fn allow_files_folders_serve_absolute_paths_and_relative_ones_need_an_origin() {
    let (dir, _folder) = escape_layout();
    let fake = admin_fake(FakeConfig::default().allow_files(dir.path())).await;
    let secret = dir.path().join("secret.txt");
    let r = post_scenario(
        &fake,
        "/__admin/scenario",
        &goalstate_from_file("secret.txt"),
    )
    .await;
    assert_eq!(r.status, 400);
    assert!(
        r.text()
            .contains("cannot read \"secret.txt\": a relative path needs the scenario's folder"),
        "{}",
        r.text()
    );
    let r = post_scenario(
        &fake,
        "/__admin/scenario",
        &goalstate_from_file(&secret.display().to_string()),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(served_goalstate(&fake).await.text(), "SECRET-OUTSIDE");
}

// ---------------------------------------------------------------------------------------------
// Oversized files

#[tokio::test]
async fn oversized_body_file_is_refused_and_one_at_the_cap_loads() {
    let dir = tempfile::tempdir().unwrap();
    let cap = MAX_FILE_BYTES as usize;
    std::fs::write(dir.path().join("at-cap.xml"), vec![b'x'; cap]).unwrap();
    std::fs::write(dir.path().join("over.xml"), vec![b'x'; cap + 1]).unwrap();
    let fake = admin_fake(FakeConfig::default()).await;
    let target = format!(
        "/__admin/scenario?origin={}",
        dir.path().join("s.toml").display()
    );
    let r = post_scenario(&fake, &target, &goalstate_from_file("over.xml")).await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(
        r.text().contains(
            "endpoint[1].step[1].body_file: cannot read \"over.xml\": it is larger than 1048576 bytes (1 MiB)"
        ),
        "{}",
        r.text()
    );
    assert_nothing_loaded(&fake).await;
    let r = post_scenario(&fake, &target, &goalstate_from_file("at-cap.xml")).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(served_goalstate(&fake).await.body.len(), cap);
}

#[tokio::test]
async fn a_file_that_says_it_is_empty_but_is_larger_than_the_cap_is_refused() {
    // /proc files are regular with st_size 0 whatever they hold: the size must be counted while
    // reading, not taken from fstat. A child with 1.2 MiB of environment has such a file.
    let mut child = Command::new("sleep");
    child.arg("60").env_clear();
    if let Some(path) = std::env::var_os("PATH") {
        child.env("PATH", path);
    }
    for i in 0..12 {
        child.env(format!("FILL{i}"), "x".repeat(100 * 1024));
    }
    let child = child.spawn().unwrap();
    struct Kill(Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let child = Kill(child);
    let environ = format!("/proc/{}/environ", child.0.id());
    let until = Instant::now() + T;
    // The environment is readable once the child has exec'd.
    while std::fs::read(&environ).map_or(0, |b| b.len()) as u64 <= MAX_FILE_BYTES {
        assert!(Instant::now() < until, "{environ} never grew past 1 MiB");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(std::fs::metadata(&environ).unwrap().len(), 0);

    let fake = admin_fake(FakeConfig::default().allow_files("/proc")).await;
    let r = post_scenario(&fake, "/__admin/scenario", &goalstate_from_file(&environ)).await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(
        r.text().contains(&format!(
            "cannot read {environ:?}: it is larger than 1048576 bytes"
        )),
        "{}",
        r.text()
    );
    assert_nothing_loaded(&fake).await;
}

// ---------------------------------------------------------------------------------------------
// The binary: FIFO and /dev/zero bodies

/// The binary as a child (killed on drop), with its ready line.
struct Running {
    child: Child,
    ready: serde_json::Value,
}

impl Running {
    fn start(args: &[&str]) -> Running {
        let mut child = Command::new(env!("CARGO_BIN_EXE_fake-wireserver"))
            .args(args)
            .env_remove("FAKE_WIRESERVER_SCENARIO")
            .env_remove("FAKE_WIRESERVER_ALLOW_FILES")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let ready = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
        Running { child, ready }
    }
    fn addr(&self, key: &str) -> SocketAddr {
        self.ready[key].as_str().unwrap().parse().unwrap()
    }
    fn token(&self) -> &str {
        self.ready["admin_token"].as_str().unwrap()
    }
    async fn post_scenario(&self, target: &str, body: &str) -> Outcome {
        let admin = self.addr("admin");
        let headers = client_headers(admin, self.token());
        exchange(admin, &request("POST", target, &headers, body), T).await
    }
    fn vm_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }
    /// SIGTERM, then the exit status within `within`.
    fn terminate(&mut self, within: Duration) -> std::process::ExitStatus {
        rustix::process::kill_process(
            rustix::process::Pid::from_child(&self.child),
            rustix::process::Signal::TERM,
        )
        .unwrap();
        let until = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < until, "SIGTERM did not stop the fake");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn mkfifo(path: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
}

#[tokio::test]
async fn fifo_body_is_refused_promptly_the_fake_keeps_serving_and_sigterm_stops_it() {
    let dir = tempfile::tempdir().unwrap();
    mkfifo(&dir.path().join("pipe"));
    let mut fake = Running::start(&[]);
    let target = format!(
        "/__admin/scenario?origin={}",
        dir.path().join("s.toml").display()
    );
    for (scenario, field) in [
        (goalstate_from_file("pipe"), "endpoint[1].step[1].body_file"),
        (
            "[imds]\ninstance_file = \"pipe\"\n".to_owned(),
            "imds.instance_file",
        ),
    ] {
        let started = Instant::now();
        let r = response(fake.post_scenario(&target, &scenario).await);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the refusal took {:?}",
            started.elapsed()
        );
        assert_eq!(r.status, 400, "{}", r.text());
        assert!(
            r.text().contains(&format!(
                "{field}: cannot read \"pipe\": it is a FIFO; expected a regular file"
            )),
            "{}",
            r.text()
        );
    }
    // Both listeners still answer.
    let gs = response(exchange(fake.addr("wireserver"), &goalstate_get(), T).await);
    assert_eq!(gs.status, 200);
    let md = common::get(
        "/metadata/instance?api-version=2021-08-01",
        "169.254.169.254",
        &[("Metadata", "true")],
    );
    assert_eq!(
        response(exchange(fake.addr("imds"), &md, T).await).status,
        200
    );
    let status = fake.terminate(Duration::from_secs(10));
    assert!(status.success(), "{status:?}");
}

#[test]
fn fifo_body_in_the_scenario_file_refuses_to_start_promptly() {
    let dir = tempfile::tempdir().unwrap();
    mkfifo(&dir.path().join("pipe"));
    let file = dir.path().join("s.toml");
    std::fs::write(&file, goalstate_from_file("pipe")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_fake-wireserver"))
        .arg("--scenario")
        .arg(&file)
        .env_remove("FAKE_WIRESERVER_ALLOW_FILES")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the fake blocked on the FIFO");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().unwrap();
    assert_eq!(status.code(), Some(2));
    assert!(out.stdout.is_empty(), "no ready line");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "s.toml:7:13: endpoint[1].step[1].body_file: cannot read \"pipe\": it is a FIFO"
        ),
        "{stderr}"
    );
}

#[tokio::test]
async fn dev_zero_body_is_refused_and_the_fake_does_not_grow() {
    let fake = Running::start(&["--allow-files", "/dev"]);
    // A guard for the machine, should the refusal ever break: the fake dies at 2 GiB of address
    // space instead of growing without end.
    let two_gib = 2 << 30;
    rustix::process::prlimit(
        Some(rustix::process::Pid::from_child(&fake.child)),
        rustix::process::Resource::As,
        rustix::process::Rlimit {
            current: Some(two_gib),
            maximum: Some(two_gib),
        },
    )
    .unwrap();
    let before = fake.vm_rss_kib();
    for path in ["/dev/zero", "/dev/urandom", "/dev/null"] {
        let r = response(
            fake.post_scenario("/__admin/scenario", &goalstate_from_file(path))
                .await,
        );
        assert_eq!(r.status, 400, "{path}: {}", r.text());
        assert!(
            r.text().contains(&format!(
                "endpoint[1].step[1].body_file: cannot read {path:?}: it is a character device; expected a regular file"
            )),
            "{}",
            r.text()
        );
    }
    let after = fake.vm_rss_kib();
    assert!(
        after < before + 32 * 1024,
        "VmRSS grew from {before} KiB to {after} KiB"
    );
    let gs = response(exchange(fake.addr("wireserver"), &goalstate_get(), T).await);
    assert_eq!(gs.status, 200);
    assert!(gs.text().contains("<GoalState"));
}

// ---------------------------------------------------------------------------------------------
// Browser-style admin requests

#[tokio::test]
async fn browser_style_admin_request_is_refused_with_403_and_nothing_is_loaded() {
    let fake = admin_fake(FakeConfig::default()).await;
    let admin = fake.admin_addr().unwrap();
    let token = fake.admin_token().unwrap().to_owned();
    // A scenario that would break the goal state if it were ever loaded.
    let scenario = "[[endpoint]]\nid = \"wireserver.goalstate\"\nend = \"repeat-last\"\n[[endpoint.step]]\nkind = \"respond\"\npreset = \"gone\"\n";
    let with = |changes: &[(&str, Option<&str>)]| -> Headers {
        let mut h = client_headers(admin, &token);
        for (name, value) in changes {
            h.retain(|(k, _)| !k.eq_ignore_ascii_case(name));
            if let Some(v) = value {
                h.push(((*name).to_owned(), (*v).to_owned()));
            }
        }
        h
    };
    let other_port = format!("127.0.0.1:{}", admin.port().wrapping_add(1));
    let cases: Vec<(&str, Headers, &str)> = vec![
        (
            "Origin",
            with(&[("Origin", Some("http://attacker.example"))]),
            "requests with an Origin header are refused",
        ),
        (
            "Origin null",
            with(&[("Origin", Some("null"))]),
            "requests with an Origin header are refused",
        ),
        (
            "Sec-Fetch-Site",
            with(&[("Sec-Fetch-Site", Some("cross-site"))]),
            "requests with a sec-fetch-site header are refused",
        ),
        (
            "text/plain",
            with(&[("Content-Type", Some("text/plain;charset=UTF-8"))]),
            "Content-Type \"text/plain;charset=UTF-8\" is refused; expected application/toml or application/json",
        ),
        (
            "form",
            with(&[("Content-Type", Some("application/x-www-form-urlencoded"))]),
            "is refused; expected application/toml or application/json",
        ),
        (
            "multipart",
            with(&[("Content-Type", Some("multipart/form-data; boundary=x"))]),
            "is refused; expected application/toml or application/json",
        ),
        (
            "no content type",
            with(&[("Content-Type", None)]),
            "a POST body needs a Content-Type",
        ),
        (
            "DNS rebinding",
            with(&[("Host", Some(&format!("attacker.example:{}", admin.port())))]),
            "is not this listener",
        ),
        (
            "another port",
            with(&[("Host", Some(&other_port))]),
            "is not this listener",
        ),
        (
            "no Host",
            with(&[("Host", None)]),
            "a Host header is required",
        ),
    ];
    for (what, headers, reason) in &cases {
        let r = send(admin, "POST", "/__admin/scenario", headers, scenario).await;
        assert_eq!(r.status, 403, "{what}: {}", r.text());
        let text = r.text();
        assert!(
            text.starts_with("admin API: ") && text.contains(reason),
            "{what}: {text}"
        );
        assert_eq!(text.lines().count(), 1, "{what}: one line: {text}");
        assert_nothing_loaded(&fake).await;
    }
    // A browser cannot empty the journal either.
    let before = fake.journal().len();
    assert!(before > 0);
    let r = send(
        admin,
        "POST",
        "/__admin/reset",
        &with(&[
            ("Origin", Some("http://attacker.example")),
            ("Content-Type", None),
        ]),
        "",
    )
    .await;
    assert_eq!(r.status, 403);
    assert_eq!(fake.journal().len(), before);

    // The same scenario from an admin client is loaded (the refusals are not vacuous), also
    // with Host localhost:PORT; a JSON body to the TOML endpoint is 415.
    let r = send(
        admin,
        "POST",
        "/__admin/scenario",
        &with(&[("Content-Type", Some("application/json"))]),
        scenario,
    )
    .await;
    assert_eq!(r.status, 415, "{}", r.text());
    assert_nothing_loaded(&fake).await;
    let localhost = format!("localhost:{}", admin.port());
    let r = send(
        admin,
        "POST",
        "/__admin/scenario",
        &with(&[("Host", Some(&localhost))]),
        scenario,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(served_goalstate(&fake).await.status, 410);
    // A body-less reset needs no content type.
    let r = send(
        admin,
        "POST",
        "/__admin/reset",
        &with(&[("Content-Type", None)]),
        "",
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(fake.journal().is_empty());
}

// ---------------------------------------------------------------------------------------------
// The token

#[tokio::test]
async fn missing_or_wrong_admin_token_is_401_and_nothing_is_done() {
    let fake = admin_fake(FakeConfig::default()).await;
    let admin = fake.admin_addr().unwrap();
    let token = fake.admin_token().unwrap().to_owned();
    assert_eq!(token.len(), 64);
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
    let other = admin_fake(FakeConfig::default()).await;
    assert_ne!(other.admin_token(), fake.admin_token(), "a token per start");

    assert_eq!(served_goalstate(&fake).await.status, 200);
    let mut flipped = token.clone().into_bytes();
    flipped[63] = if flipped[63] == b'0' { b'1' } else { b'0' };
    let flipped = String::from_utf8(flipped).unwrap();
    let authorizations: Vec<(&str, Option<String>)> = vec![
        ("missing", None),
        ("empty", Some(String::new())),
        ("bearer only", Some("Bearer ".into())),
        ("one digit off", Some(format!("Bearer {flipped}"))),
        ("prefix", Some(format!("Bearer {}", &token[..32]))),
        ("longer", Some(format!("Bearer {token}0"))),
        ("basic", Some(format!("Basic {token}"))),
        ("no scheme", Some(token.clone())),
        (
            "another fake's",
            Some(format!("Bearer {}", other.admin_token().unwrap())),
        ),
    ];
    let scenario = "[[endpoint]]\nid = \"wireserver.goalstate\"\n[[endpoint.step]]\nkind = \"respond\"\npreset = \"gone\"\n";
    for (what, auth) in &authorizations {
        let mut headers = vec![
            ("Host".to_owned(), admin.to_string()),
            ("Content-Type".to_owned(), "application/toml".to_owned()),
        ];
        if let Some(a) = auth {
            headers.push(("Authorization".to_owned(), a.clone()));
        }
        for (method, target, body) in [
            ("GET", "/__admin/journal", ""),
            ("GET", "/__admin/served", ""),
            ("POST", "/__admin/reset", ""),
            ("POST", "/__admin/scenario", scenario),
            ("GET", "/__admin/no-such-path", ""),
        ] {
            let r = send(admin, method, target, &headers, body).await;
            assert_eq!(r.status, 401, "{what}: {method} {target}: {}", r.text());
            assert_eq!(r.header("www-authenticate"), Some("Bearer"));
            assert!(!r.text().contains("\"seq\""), "{what}: the journal leaked");
            assert!(
                !r.text().contains("incarnation"),
                "{what}: served ids leaked"
            );
        }
    }
    // Nothing was done: no reset (the journal keeps every request), no scenario.
    assert_eq!(fake.journal().len(), 1);
    assert_nothing_loaded(&fake).await;
    // With the token: 200.
    let r = send(
        admin,
        "GET",
        "/__admin/served",
        &client_headers(admin, &token),
        "",
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
}

// ---------------------------------------------------------------------------------------------
// --allow-files

fn fake_bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_fake-wireserver"));
    c.env_remove("FAKE_WIRESERVER_SCENARIO")
        .env_remove("FAKE_WIRESERVER_ALLOW_FILES");
    c
}

#[tokio::test]
async fn allow_files_flag_and_variable_add_folders_for_the_scenario_file() {
    let (dir, folder) = escape_layout();
    let file = folder.join("s.toml");
    let secret = dir.path().join("secret.txt").display().to_string();
    std::fs::write(&file, goalstate_from_file(&secret)).unwrap();

    // Without --allow-files the file outside the scenario's folder stops the start.
    let out = fake_bin().arg("--scenario").arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("endpoint[1].step[1].body_file: cannot read")
            && stderr.contains("outside the allowed folders"),
        "{stderr}"
    );
    // A folder that does not exist is a usage error.
    let out = fake_bin()
        .args(["--allow-files", "/no/such/folder"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("--allow-files /no/such/folder: not a directory")
    );
    // The variable takes a colon-separated list.
    let out = fake_bin()
        .env(
            "FAKE_WIRESERVER_ALLOW_FILES",
            format!("{}:/tmp", dir.path().display()),
        )
        .arg("--print-config")
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        printed.contains(&format!(
            "allow_files = [\"{}\", \"/tmp\"]",
            dir.path().display()
        )),
        "{printed}"
    );

    // With the flag the scenario loads and its file is served.
    let mut fake = Running::start(&[
        "--scenario",
        &file.display().to_string(),
        "--allow-files",
        &dir.path().display().to_string(),
    ]);
    let gs = response(exchange(fake.addr("wireserver"), &goalstate_get(), T).await);
    assert_eq!(gs.text(), "SECRET-OUTSIDE");
    assert!(fake.terminate(Duration::from_secs(10)).success());
}
