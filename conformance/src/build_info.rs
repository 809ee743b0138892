//! Which build this binary is: its version and the commit it was built from (found at build
//! time by `build.rs` through `wirecheck-build-stamp`: `WIRECHECK_COMMIT`, else git, else
//! `unknown`). `wirecheck --version` prints [`BUILD`]; results.json records both parts.

/// The crate's version, e.g. `0.1.0`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The commit hash the binary was built from, or `unknown`.
pub const COMMIT: &str = env!("WIRECHECK_BUILD_COMMIT");
/// `<version> (commit <hash>)`.
pub const BUILD: &str = env!("WIRECHECK_BUILD");

/// An empty results file stamped with this build (version and commit).
pub fn new_results(started: impl Into<String>) -> wirecheck_results::RunResults {
    wirecheck_results::RunResults::of_build(started, VERSION, COMMIT)
}
