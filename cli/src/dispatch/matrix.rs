//! `wirecheck matrix RESULTS`: the results crate's matrix printed as a tool's output.

use std::path::Path;

use crate::status::tool;

/// `wirecheck matrix RESULTS`: the table on stdout, or exit 2 naming what cannot be read.
pub fn matrix(results: &Path) -> u8 {
    use conformance::tools::{EXIT_OK, ToolError, ToolOutput};
    let output = wirecheck_results::matrix::read(results)
        .map(|r| ToolOutput {
            stdout: wirecheck_results::matrix::render(&r),
            exit_code: EXIT_OK,
        })
        .map_err(|e| ToolError::BadFolder {
            path: e.path,
            message: e.message,
        });
    tool(conformance::tools::emit(output))
}
