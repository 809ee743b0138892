//! Exit statuses and how a command says it cannot go on: `wirecheck: error: ...` on stderr,
//! exit 2; what it prints on stdout, a reader that went away being no error.

/// Exit status: no case failed.
pub const EXIT_OK: u8 = 0;

/// Exit status: at least one case failed (or, with `--strict`, was non-strict).
pub const EXIT_FAILED: u8 = 1;

/// Exit status: usage error or bad input (profile, scenario, missing agent command).
pub const EXIT_USAGE: u8 = 2;

/// Says `wirecheck: error: MESSAGE` on stderr (control characters made visible); exit 2.
pub fn usage(message: impl std::fmt::Display) -> u8 {
    eprintln!(
        "wirecheck: error: {}",
        wirecheck_results::text::visible_lines(&message.to_string())
    );
    EXIT_USAGE
}

/// A tool's exit code as the process's.
pub fn tool(code: i32) -> u8 {
    u8::try_from(code).unwrap_or(EXIT_USAGE)
}

/// One line on stdout; a reader that went away (`wirecheck snapshots pending | head`) is not
/// an error ([`conformance::tools::write_stdout`]), where `println!` panics on the broken pipe.
pub fn say(line: String) {
    conformance::tools::write_stdout(&(line + "\n"));
}
