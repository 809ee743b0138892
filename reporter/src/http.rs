//! The one HTTP client both services are reached with: a thin layer over reqwest that reads a
//! bounded body and logs response headers at debug level.

use std::error::Error as StdError;

use reqwest::header::HeaderMap;

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

    /// The body as text, lossily, cut for log lines and error messages.
    pub fn body_excerpt(&self) -> String {
        let text = String::from_utf8_lossy(&self.body);
        let text = text.trim();
        let cut = crate::format::cut_at_char_boundary(text, 200);
        if cut.len() < text.len() {
            format!("{cut}…")
        } else {
            cut.to_owned()
        }
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
    pub fn new(user_agent: &str, use_env_proxy: bool) -> Result<Http, reqwest::Error> {
        let mut builder = reqwest::Client::builder().user_agent(user_agent);
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
    /// dropping the future abandons the connection.
    pub async fn execute(
        &self,
        label: &str,
        request: reqwest::RequestBuilder,
    ) -> Result<Answer, reqwest::Error> {
        let mut response = request.send().await?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        tracing::debug!(
            request = label,
            status,
            headers = %format_headers(&headers),
            "response headers"
        );
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

fn format_headers(headers: &HeaderMap) -> String {
    headers
        .iter()
        .map(|(name, value)| format!("{name}: {}", String::from_utf8_lossy(value.as_bytes())))
        .collect::<Vec<_>>()
        .join("; ")
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
