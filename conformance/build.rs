//! Embeds the default suite (`scenarios/*.toml`) and the agent profiles
//! (`conformance/agents/*.toml`) in the binary, so an installed `wirecheck` works with nothing
//! beside it (`src/embedded.rs`), and names the build's commit (`wirecheck-build-stamp`:
//! `WIRECHECK_BUILD`, `WIRECHECK_BUILD_COMMIT`; `src/build_info.rs`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn tomls(dir: &Path) -> Vec<PathBuf> {
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("readable folder").path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    files
}

fn table(out: &mut String, name: &str, files: &[PathBuf]) {
    writeln!(out, "pub static {name}: &[(&str, &str)] = &[").unwrap();
    for f in files {
        let file_name = f.file_name().unwrap().to_str().expect("UTF-8 file name");
        let abs = f.canonicalize().expect("file exists");
        writeln!(
            out,
            "    ({file_name:?}, include_str!({:?})),",
            abs.display().to_string()
        )
        .unwrap();
    }
    writeln!(out, "];").unwrap();
}

fn main() {
    wirecheck_build_stamp::emit();
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let mut out = String::new();
    table(
        &mut out,
        "SCENARIOS",
        &tomls(&manifest.join("../scenarios")),
    );
    table(&mut out, "PROFILES", &tomls(&manifest.join("agents")));
    let dest = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("embedded.rs");
    std::fs::write(dest, out).unwrap();
}
