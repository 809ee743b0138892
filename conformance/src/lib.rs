//! wirecheck conformance runner (work in progress).
