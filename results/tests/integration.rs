//! The results crate's integration tests, one binary: each file a module (the HTML report, the
//! JSON and JUnit writers, the model).

// A test reads top to bottom as the story it checks; the length rule is for the code it tests.
#![allow(clippy::too_many_lines)]

mod results_support;

mod results_html;
mod results_json;
mod results_junit;
mod results_model;
