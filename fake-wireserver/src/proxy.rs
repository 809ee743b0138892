//! What the fake's proxy mode means to the agents around it.

/// The variables HTTP clients read a proxy from (curl, Python's urllib and requests, Go's and
/// Rust's reqwest read both spellings). An agent run against the fake gets none of them but the
/// fake's own proxy (`http_proxy` / `HTTP_PROXY`, in proxy mode), so nothing it sends goes
/// through a proxy of the machine's.
pub const CLIENT_VARIABLES: [&str; 8] = [
    "http_proxy",
    "HTTP_PROXY",
    "https_proxy",
    "HTTPS_PROXY",
    "all_proxy",
    "ALL_PROXY",
    "no_proxy",
    "NO_PROXY",
];
