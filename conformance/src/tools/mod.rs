//! Stand-alone inspection commands: `kvp dump`, `report parse`, `vectors check` (`matrix` is
//! the results crate's: `wirecheck_results::matrix`).
//!
//! Each is a library function that returns the text to print and the exit
//! code ([`ToolOutput`]), or a [`ToolError`] for input it cannot use at all
//! (exit 2). The `wirecheck` binary only parses flags and prints; see
//! [`emit`].

mod kvp_dump;
mod report_parse;
pub(crate) mod text;
pub mod vectors;

use std::path::PathBuf;

pub use kvp_dump::kvp_dump;
pub use report_parse::report_parse;
pub use vectors::{vectors_check, vectors_check_blocking};

/// Exit code: the input was read and everything is in order.
pub const EXIT_OK: i32 = 0;
/// Exit code: the input was read and has problems (error findings, mismatches).
pub const EXIT_PROBLEMS: i32 = 1;
/// Exit code: the input could not be used at all (missing file, not a vectors folder, ...).
pub const EXIT_BAD_INPUT: i32 = 2;

/// What a tool prints on stdout and how the process should exit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    pub stdout: String,
    pub exit_code: i32,
}

/// Input a tool cannot use. The message names the file or argument.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: is a directory; expected {expected}")]
    IsDirectory {
        path: PathBuf,
        expected: &'static str,
    },
    #[error("{path}: {message}")]
    BadFolder { path: PathBuf, message: String },
    #[error("cannot start the in-process fake: {0}")]
    Fake(String),
}

impl ToolError {
    pub fn exit_code(&self) -> i32 {
        EXIT_BAD_INPUT
    }
}

/// Prints a tool's result (stdout, or `wirecheck: <error>` on stderr) and
/// returns the process exit code.
pub fn emit(result: Result<ToolOutput, ToolError>) -> i32 {
    match result {
        Ok(output) => {
            write_stdout(&output.stdout);
            output.exit_code
        }
        Err(error) => {
            eprintln!("wirecheck: {}", text::visible_lines(&error.to_string()));
            error.exit_code()
        }
    }
}

/// Prints `text` on stdout. A reader that went away (`wirecheck list | head`) is not an
/// error: the rest is dropped quietly, where `print!` would panic on the broken pipe.
pub fn write_stdout(text: &str) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(e) => eprintln!("wirecheck: cannot write to stdout: {e}"),
    }
}

/// Reads a file argument, with errors that name it.
/// Largest file `kvp dump` and `report parse` read: 512 MiB (a pool of 200,000 records).
pub const MAX_TOOL_INPUT: u64 = 512 << 20;

fn read_input_file(path: &std::path::Path, expected: &'static str) -> Result<Vec<u8>, ToolError> {
    if path.is_dir() {
        return Err(ToolError::IsDirectory {
            path: path.to_path_buf(),
            expected,
        });
    }
    fake_wireserver::files::read_regular_file(path, MAX_TOOL_INPUT).map_err(|source| {
        ToolError::Read {
            path: path.to_path_buf(),
            source,
        }
    })
}
