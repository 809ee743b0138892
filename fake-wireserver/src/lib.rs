//! Fake wireserver + IMDS (work in progress).
