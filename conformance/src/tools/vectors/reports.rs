//! `reports/*.json`: each `{name, dialect, encoded, fields}` through
//! oracle::encoded, strict and lenient.

use std::path::Path;

use serde_json::{Value, json};
use wirecheck_oracle::encoded::{self, Mode};

use super::{VectorOutcome, differs, read_json, relative};

pub(super) fn check(dir: &Path, file: &Path) -> Vec<VectorOutcome> {
    let name = relative(dir, file);
    let list = match read_json(file) {
        Ok(Value::Array(list)) => list,
        Ok(_) => {
            return vec![VectorOutcome::new(
                name,
                vec!["expected a JSON list of reports".into()],
            )];
        }
        Err(e) => return vec![VectorOutcome::new(name, vec![e])],
    };
    list.iter()
        .enumerate()
        .map(|(index, item)| {
            let label = item["name"]
                .as_str()
                .map_or_else(|| format!("{name}#{index}"), |n| format!("{name}#{n}"));
            VectorOutcome::new(label, check_one(item))
        })
        .collect()
}

fn check_one(item: &Value) -> Vec<String> {
    let Some(input) = item["encoded"].as_str() else {
        return vec!["missing string field `encoded`".into()];
    };
    let mut mismatches = Vec::new();
    for (mode, label) in [(Mode::Strict, "strict"), (Mode::Lenient, "lenient")] {
        match encoded::parse(input, mode) {
            Ok(report) => {
                let dialect = json!(report.dialect);
                if dialect != item["dialect"] {
                    mismatches.push(differs(
                        &format!("{label} dialect"),
                        &item["dialect"],
                        &dialect,
                    ));
                }
                let fields = json!(report.fields);
                if fields != item["fields"] {
                    mismatches.push(differs(
                        &format!("{label} fields"),
                        &item["fields"],
                        &fields,
                    ));
                }
            }
            Err(e) => mismatches.push(format!("{label} parse fails: {e}")),
        }
    }
    mismatches
}
