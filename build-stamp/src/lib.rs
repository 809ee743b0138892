//! Names the exact build of wirecheck's binaries: which commit they were built from. Used only
//! by the build scripts of `conformance`, `fake-wireserver` and `reporter` (a build-dependency:
//! nothing of it is linked into a binary, so the judging side and the reporter still share no
//! code), which call [`emit`]; the crates then read two compile-time variables:
//!
//! - `WIRECHECK_BUILD_COMMIT`: the commit hash, or `unknown`;
//! - `WIRECHECK_BUILD`: `<version> (commit <hash>)`, what every binary's `--version` prints.
//!
//! Where the commit comes from, first found wins:
//! 1. `WIRECHECK_COMMIT` in the build's environment (7 to 64 lowercase hex digits; anything
//!    else fails the build): for a build from a source tarball, which has no `.git`
//!    (scripts/release.sh sets it too, from the checkout it builds);
//! 2. `git rev-parse HEAD` in the crate's folder, when git is there and that repository tracks
//!    the crate's Cargo.toml (a crate unpacked inside some other repository names none);
//! 3. `unknown`.
//!
//! Uncommitted changes are not marked: the commit is HEAD's at build time. Cargo reruns the
//! build script when the variable changes or HEAD moves (HEAD, its reflog, the branch's ref,
//! packed-refs).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The build-environment variable that names the commit explicitly.
pub const COMMIT_VAR: &str = "WIRECHECK_COMMIT";
/// What a build whose commit cannot be found says.
pub const UNKNOWN: &str = "unknown";

/// Where a build's commit came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Commit {
    /// `WIRECHECK_COMMIT`.
    Given(String),
    /// The git repository the crate is in; `watch`: the files that move when HEAD does.
    Git {
        hash: String,
        watch: Vec<PathBuf>,
    },
    Unknown,
}

impl Commit {
    pub fn hash(&self) -> &str {
        match self {
            Commit::Given(hash) | Commit::Git { hash, .. } => hash,
            Commit::Unknown => UNKNOWN,
        }
    }
}

/// `WIRECHECK_COMMIT` holds something that is not a commit hash.
#[derive(Debug, PartialEq, Eq)]
pub struct BadCommit(pub String);

impl std::fmt::Display for BadCommit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{COMMIT_VAR}={:?}: expected a git commit hash (7 to 64 lowercase hex digits)",
            self.0
        )
    }
}

fn is_hash(text: &str) -> bool {
    (7..=64).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The commit of the crate in `crate_dir`, `given` being `WIRECHECK_COMMIT` (empty: unset).
pub fn find(crate_dir: &Path, given: Option<&str>) -> Result<Commit, BadCommit> {
    match given.map(str::trim) {
        Some(hash) if !hash.is_empty() => {
            if is_hash(hash) {
                Ok(Commit::Given(hash.to_owned()))
            } else {
                Err(BadCommit(hash.to_owned()))
            }
        }
        _ => Ok(from_git(crate_dir).unwrap_or(Commit::Unknown)),
    }
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn from_git(crate_dir: &Path) -> Option<Commit> {
    // Only the repository that holds this crate: not one it was unpacked inside.
    git(crate_dir, &["ls-files", "--error-unmatch", "Cargo.toml"])?;
    let hash = git(crate_dir, &["rev-parse", "HEAD"]).filter(|h| is_hash(h))?;
    let git_path = |name: &str| {
        git(
            crate_dir,
            &["rev-parse", "--path-format=absolute", "--git-path", name],
        )
        .map(PathBuf::from)
    };
    // HEAD's reflog moves with every commit, checkout or reset of this working tree (and only
    // this one's: other worktrees of the repository have their own).
    let mut watch: Vec<PathBuf> = ["HEAD", "logs/HEAD", "packed-refs"]
        .iter()
        .filter_map(|name| git_path(name))
        .collect();
    if let Some(branch) = git(crate_dir, &["symbolic-ref", "-q", "HEAD"])
        && let Some(ref_file) = git_path(&branch)
    {
        // Without a reflog, a branch packed in packed-refs has no file of its own until its
        // next commit, which creates it in its folder: watch the folder then (it also moves
        // with every other branch's commits: more rebuilds, never a stale commit).
        let reflog = watch.get(1).is_some_and(|log| log.exists());
        if !reflog && !ref_file.exists() {
            watch.extend(ref_file.parent().map(Path::to_path_buf));
        }
        watch.push(ref_file);
    }
    // Cargo reruns a build script on every build when a watched path is missing.
    watch.retain(|p| p.exists());
    Some(Commit::Git { hash, watch })
}

/// For a build script: finds the commit of the crate being built and tells cargo the two
/// variables (see the crate's header) and when to find it again. A bad `WIRECHECK_COMMIT` fails
/// the build, saying what is expected.
pub fn emit() {
    println!("cargo:rerun-if-env-changed={COMMIT_VAR}");
    let crate_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("run by cargo"));
    let given = std::env::var(COMMIT_VAR).ok();
    let commit = find(&crate_dir, given.as_deref()).unwrap_or_else(|e| panic!("{e}"));
    if let Commit::Git { watch, .. } = &commit {
        for path in watch {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    let version = std::env::var("CARGO_PKG_VERSION").expect("run by cargo");
    println!("cargo:rustc-env=WIRECHECK_BUILD_COMMIT={}", commit.hash());
    println!(
        "cargo:rustc-env=WIRECHECK_BUILD={version} (commit {})",
        commit.hash()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
            .args(args)
            .output()
            .expect("git runs");
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    fn repo_with_crate() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("krate")).unwrap();
        std::fs::write(dir.path().join("krate/Cargo.toml"), "[package]\n").unwrap();
        run_git(dir.path(), &["init", "-q", "-b", "main"]);
        run_git(dir.path(), &["add", "."]);
        run_git(dir.path(), &["commit", "-q", "-m", "one"]);
        dir
    }

    #[test]
    fn the_crates_own_repository_names_head_and_the_files_that_move_with_it() {
        let dir = repo_with_crate();
        let head = run_git(dir.path(), &["rev-parse", "HEAD"]);
        let Commit::Git { hash, watch } = find(&dir.path().join("krate"), None).unwrap() else {
            panic!("expected the git commit")
        };
        assert_eq!(hash, head);
        let git_dir = dir.path().join(".git").canonicalize().unwrap();
        assert!(watch.contains(&git_dir.join("HEAD")), "{watch:?}");
        assert!(
            watch.contains(&git_dir.join("refs/heads/main")),
            "{watch:?}"
        );
        assert!(watch.iter().all(|p| p.exists()), "{watch:?}");

        // A new commit is a new hash.
        std::fs::write(dir.path().join("krate/x"), "x").unwrap();
        run_git(dir.path(), &["add", "."]);
        run_git(dir.path(), &["commit", "-q", "-m", "two"]);
        let again = find(&dir.path().join("krate"), None).unwrap();
        assert_eq!(again.hash(), run_git(dir.path(), &["rev-parse", "HEAD"]));
        assert_ne!(again.hash(), head);
    }

    #[test]
    fn the_variable_wins_and_must_be_a_hash() {
        let dir = repo_with_crate();
        let krate = dir.path().join("krate");
        assert_eq!(
            find(&krate, Some("0123abc")).unwrap(),
            Commit::Given("0123abc".into())
        );
        // Empty is unset (a CI expression that expanded to nothing).
        assert!(matches!(
            find(&krate, Some("")).unwrap(),
            Commit::Git { .. }
        ));
        for bad in ["main", "0123ab", "0123ABC", "v0.1.0", &"a".repeat(65)] {
            let err = find(&krate, Some(bad)).unwrap_err();
            assert!(err.to_string().contains(COMMIT_VAR), "{err}");
            assert!(err.to_string().contains("hex digits"), "{err}");
        }
    }

    #[test]
    fn a_crate_outside_any_repository_or_untracked_in_one_is_unknown() {
        let plain = tempfile::tempdir().unwrap();
        std::fs::write(plain.path().join("Cargo.toml"), "[package]\n").unwrap();
        assert_eq!(find(plain.path(), None).unwrap(), Commit::Unknown);
        assert_eq!(Commit::Unknown.hash(), "unknown");

        // Unpacked inside someone else's repository: that repository's HEAD is not its commit.
        let dir = repo_with_crate();
        let unpacked = dir.path().join("vendored");
        std::fs::create_dir(&unpacked).unwrap();
        std::fs::write(unpacked.join("Cargo.toml"), "[package]\n").unwrap();
        assert_eq!(find(&unpacked, None).unwrap(), Commit::Unknown);
    }
}
