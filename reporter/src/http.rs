//! The one HTTP client both services are reached with: a thin layer over reqwest that reads a
//! bounded body and logs response headers at debug level.
//!
//! Redirects are never followed: a 3xx is an answer like any other status (the platform never
//! redirects, and following one would carry the report, or IMDS's `Metadata: true` request, to
//! whatever host the `Location` names). The callers' retry sets do not list any 3xx, so it
//! fails the step at once, and the error names the `Location` it did not follow.

use std::error::Error as StdError;

use reqwest::header::{HeaderMap, LOCATION};

use crate::bounded_log::{
    BODY_MAX, Excerpt, HEADER_NAME_MAX, HEADER_VALUE_MAX, HEADERS_MAX, ID_MAX, is_sampled,
};

/// Bodies beyond this are not read: nothing the reporter parses is anywhere near it.
pub const MAX_BODY_BYTES: usize = 256 * 1024;

/// An answer: status, headers and (at most [`MAX_BODY_BYTES`] of) the body.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// What an error message says about a refused answer, beyond its status: the `Location` a
    /// redirect was not followed to, and the start of the body; escaped and clipped
    /// ([`crate::bounded_log`]). Empty when there is nothing to say.
    pub fn detail(&self) -> String {
        let mut parts = Vec::new();
        if (300..400).contains(&self.status) {
            let location = match self.headers.get(LOCATION) {
                Some(location) => format!("to {}", Excerpt::of_bytes(location.as_bytes(), ID_MAX)),
                None => "without a Location".to_owned(),
            };
            parts.push(format!("a redirect {location}, not followed"));
        }
        let body = Excerpt::of_bytes(&self.body, BODY_MAX);
        if !body.is_empty() {
            parts.push(format!("body: {body}"));
        }
        parts.join("; ")
    }
}

/// A reqwest client configured for node-local endpoints.
#[derive(Debug, Clone)]
pub struct Http {
    client: reqwest::Client,
}

impl Http {
    /// `use_env_proxy`: honour `http_proxy` and friends. Off by default: the wireserver and
    /// IMDS are link-local and must be reached directly (WALinuxAgent never proxies them).
    /// Redirects are not followed (module documentation).
    pub fn new(user_agent: &str, use_env_proxy: bool) -> Result<Http, reqwest::Error> {
        let mut builder = reqwest::Client::builder()
            .user_agent(user_agent)
            .redirect(reqwest::redirect::Policy::none());
        if !use_env_proxy {
            builder = builder.no_proxy();
        }
        Ok(Http {
            client: builder.build()?,
        })
    }

    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// Sends `request` and reads the whole answer: a body cut short is an error, so an answer
    /// is only ever a complete one (RFC 9112 §8: an incomplete response is not a response; a
    /// 201 whose body never completes is not an accepted report, and sending again is
    /// harmless). At most [`MAX_BODY_BYTES`] are kept; the rest is read and dropped. The caller
    /// bounds the time (see [`crate::retry`]), so a dribbled body cannot stretch a run;
    /// dropping the future abandons the connection. `attempt` is the attempt's number in its
    /// budget: the response headers of [sampled](is_sampled) attempts are logged at debug.
    pub async fn execute(
        &self,
        label: &str,
        attempt: u32,
        request: reqwest::RequestBuilder,
    ) -> Result<Answer, reqwest::Error> {
        let mut response = request.send().await?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        if is_sampled(attempt) {
            tracing::debug!(
                request = label,
                attempt,
                status,
                headers = %format_headers(&headers),
                "response headers"
            );
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await? {
            let room = MAX_BODY_BYTES - body.len();
            body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        }
        Ok(Answer {
            status,
            headers,
            body,
        })
    }
}

/// `name: value; …`, each name and value an [`Excerpt`], the whole at most [`HEADERS_MAX`]
/// bytes plus a marker naming the headers left out.
fn format_headers(headers: &HeaderMap) -> String {
    let mut line = String::new();
    for (index, (name, value)) in headers.iter().enumerate() {
        let header = format!(
            "{}: {}",
            Excerpt::new(name.as_str(), HEADER_NAME_MAX),
            Excerpt::of_bytes(value.as_bytes(), HEADER_VALUE_MAX)
        );
        let separator = if line.is_empty() { "" } else { "; " };
        if line.len() + separator.len() + header.len() > HEADERS_MAX {
            let left_out = headers.len() - index;
            line.push_str(&format!("{separator}… [{left_out} more headers]"));
            break;
        }
        line.push_str(separator);
        line.push_str(&header);
    }
    line
}

/// An error and its sources, joined by `: ` (reqwest's own message names only the URL).
pub fn error_chain(error: &(dyn StdError + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
