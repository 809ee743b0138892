//! Renders report.html again from a results.json, e.g. to compare report sizes across
//! versions (bench/RESULTS.md, "report.html size and speed"):
//! `cargo run -p wirecheck-results --example render_report -- RESULTS_JSON OUT_DIR`.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [results, out] = args.as_slice() else {
        eprintln!("usage: render_report RESULTS_JSON OUT_DIR");
        return ExitCode::from(2);
    };
    let rendered = wirecheck_results::json::read(results)
        .and_then(|r| wirecheck_results::html::write(out, &r));
    match rendered.map(|path| {
        let size = std::fs::metadata(&path).map_or(0, |m| m.len());
        (path, size)
    }) {
        Ok((path, size)) => {
            println!("{} {size} bytes", path.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("render_report: {e}");
            ExitCode::FAILURE
        }
    }
}
