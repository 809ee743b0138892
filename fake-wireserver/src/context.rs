//! What a default answer needs to know about the request it answers: the documents in effect,
//! the served ids and the base URL the agent used. A leaf module: the connection path builds
//! it, the service routers (`wireserver`, `imds`, `hostplugin`) read it, and neither side
//! imports the other for it.

use std::sync::Arc;

use crate::documents::Documents;
use crate::oracle::ServedIds;

/// Per-request context handed to the axum routers (as an extension).
#[derive(Clone)]
pub(crate) struct RequestCtx {
    pub documents: Arc<Documents>,
    pub ids: ServedIds,
    /// `http://host:port` as the agent addressed the service.
    pub base_url: String,
    pub reprovision_available: bool,
}
