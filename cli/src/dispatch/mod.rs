//! One module per subcommand; [`dispatch`] runs a parsed command line. The inspection tools
//! (`kvp dump`, `report parse`, `vectors check`) and `scenarios export` are one call each into
//! the runner library, printed here.

mod list;
mod matrix;
mod merge;
mod prop;
mod run;
mod snapshots;

pub use list::list_text;

use std::process::ExitCode;

use crate::cli::{Cli, Command, KvpCommand, ReportCommand, ScenariosCommand, VectorsCommand};
use crate::status::{EXIT_OK, tool, usage};

/// Runs a parsed command line; returns the process exit status.
pub fn dispatch(cli: Cli) -> ExitCode {
    let code = match cli.command {
        Command::Run(args) => run::run(*args),
        Command::Prop(args) => prop::prop(args),
        Command::Snapshots(command) => snapshots::snapshots(command),
        Command::List(args) => list::list(args),
        Command::Kvp(KvpCommand::Dump { file, json }) => tool(conformance::tools::emit(
            conformance::tools::kvp_dump(&file, json),
        )),
        Command::Report(ReportCommand::Parse { string, json }) => tool(conformance::tools::emit(
            conformance::tools::report_parse(&string, json),
        )),
        Command::Vectors(VectorsCommand::Check { dir }) => tool(conformance::tools::emit(
            conformance::tools::vectors_check_blocking(&dir),
        )),
        Command::Matrix { results } => matrix::matrix(&results),
        Command::Merge(args) => merge::merge(args),
        Command::Scenarios(ScenariosCommand::Export { dir, agents }) => {
            match conformance::embedded::export(&dir, agents.as_deref()) {
                Ok(written) => {
                    conformance::tools::write_stdout(&format!(
                        "{} file(s) written to {}{}\n",
                        written.len(),
                        dir.display(),
                        agents
                            .as_ref()
                            .map(|a| format!(" and {}", a.display()))
                            .unwrap_or_default()
                    ));
                    EXIT_OK
                }
                Err(e) => usage(e),
            }
        }
    };
    ExitCode::from(code)
}
