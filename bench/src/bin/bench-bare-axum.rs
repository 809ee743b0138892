//! `bench-bare-axum --body FILE --content-type TYPE`: the throughput ceiling for the IMDS figure.
//!
//! One axum route, `GET /metadata/instance`, answering the bytes of FILE (captured from the
//! fake by `bench-run`, so both serve the same document) with no checks, no journal and no
//! scenario engine, on the same runtime shape and allocator as the fake binary. Prints the same
//! ready line as `fake-wireserver` (`{"imds":"ADDR"}`) and serves until killed.

// The fake binary's allocator: the ratio compares request handling, not allocators.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context as _;
use axum::Router;
use axum::http::header::CONTENT_TYPE;
use axum::routing::get;
use bytes::Bytes;
use clap::Parser;

#[derive(Debug, Parser)]
#[command(
    name = "bench-bare-axum",
    about = "A bare axum handler serving one file at /metadata/instance"
)]
struct Cli {
    /// The response body.
    #[arg(long, value_name = "FILE")]
    body: PathBuf,
    /// The Content-Type header to send.
    #[arg(
        long,
        value_name = "TYPE",
        default_value = "application/json; charset=utf-8"
    )]
    content_type: String,
    /// Listen address (port 0 = ephemeral).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    listen: SocketAddr,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let body = Bytes::from(
        std::fs::read(&cli.body).with_context(|| format!("reading {}", cli.body.display()))?,
    );
    let content_type = cli.content_type;
    // The same runtime shape as the fake binary (multi-threaded, one worker per core).
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let app = Router::new().route(
            "/metadata/instance",
            get(move || {
                let body = body.clone();
                let content_type = content_type.clone();
                async move { ([(CONTENT_TYPE, content_type)], body) }
            }),
        );
        let listener = tokio::net::TcpListener::bind(cli.listen)
            .await
            .with_context(|| format!("binding {}", cli.listen))?;
        let addr = listener.local_addr()?;
        {
            let mut out = std::io::stdout().lock();
            writeln!(out, "{}", serde_json::json!({ "imds": addr.to_string() }))?;
            out.flush()?;
        }
        axum::serve(listener, app).await.context("serving")
    })
}
