//! Showing hostile text on a terminal: the one helper both binaries use
//! ([`fake_wireserver::text`]).

pub(crate) use fake_wireserver::text::{clip, visible, visible_lines};
