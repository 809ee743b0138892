//! The results crate's integration tests, one binary: each file a module (the HTML report, the
//! JSON and JUnit writers, the model).

mod results_support;

mod results_html;
mod results_json;
mod results_junit;
mod results_model;
